"""The control plane's messages reach the queue a worker consumes, on both brokers."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection

from tessera_api.scheduling.broker import CelerySender
from tessera_worker.broker import EMBEDDED, celery_settings
from tessera_worker.celery_app import RUN_TASK, queues_of


def _receive(broker_url: str, home: Path, queue: str) -> tuple[dict[str, Any], Any]:
    settings = celery_settings(broker_url, home)
    options = settings.get("broker_transport_options", {})
    with Connection(broker_url, transport_options=options) as conn:
        simple = conn.SimpleQueue(queue)
        try:
            message = simple.get(timeout=10)
            message.ack()
            return dict(message.headers), message.decode()
        finally:
            simple.close()


@pytest.mark.parametrize("broker", ["embedded", pytest.param("redis", marks=pytest.mark.redis)])
def test_a_task_sent_to_a_worker_lands_in_its_own_queue(
    broker: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    url = EMBEDDED if broker == "embedded" else str(request.getfixturevalue("redis_url"))
    worker_id = uuid.uuid4().hex
    party_queue, own_queue = queues_of("alice", worker_id)

    CelerySender(url, tmp_path).send(
        party="alice", worker_id=worker_id, job_id="job-1", attempt=2, task_id="task-9"
    )
    headers, body = _receive(url, tmp_path, own_queue)

    assert party_queue == "party.alice"
    assert headers["task"] == RUN_TASK
    assert body[0] == ["job-1", 2, "task-9"]
    assert list(elsewhere.iterdir()) == [], "the broker wrote into the working directory"


WORKER = """
import sys
from pathlib import Path
from tessera_worker.broker import celery_settings
from tessera_worker.celery_app import app
from tessera_worker.cli import celery_worker
url, home, name, queue = sys.argv[1:]
app.conf.update(celery_settings(url, Path(home)))
celery_worker(app, name, [queue], 1).start()
"""


@pytest.mark.redis
def test_another_party_cannot_question_or_stop_a_worker_through_the_broker(
    tmp_path: Path, redis_url: str
) -> None:
    """Every party holds the password of a shared Redis: its broadcast to another party's
    worker (a ping, a shutdown) goes unheard."""
    from celery import Celery

    name = f"alice@{uuid.uuid4().hex}"
    queue = f"probe.{uuid.uuid4().hex}"
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-c", WORKER, redis_url, str(tmp_path), name, queue],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    other = Celery("another-party", broker=redis_url)
    try:
        deadline = time.monotonic() + 60
        while b"ready." not in log.read_bytes():  # consuming, remote control or not
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert other.control.ping(destination=[name], timeout=2) == []
        other.control.broadcast("shutdown", destination=[name])
        time.sleep(3)
        assert worker.poll() is None, "the worker obeyed another party's shutdown"
    finally:
        worker.terminate()
        worker.wait(30)
        other.close()
