"""The control plane's messages reach the queue a worker consumes, on both brokers."""

from __future__ import annotations

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
