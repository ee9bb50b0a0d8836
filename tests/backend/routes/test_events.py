"""The events stream: status changes and metric summaries, resumable by id."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from tessera_ml.worlds import free_port
from tests.backend.factories import ADMIN, API, report, running_job


def parse(text: str) -> list[dict[str, Any]]:
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "id" in fields:
            events.append(
                {"id": int(fields["id"]), "event": fields["event"], **json.loads(fields["data"])}
            )
    return events


def test_stream_serves_status_and_metrics_and_resumes(client: TestClient) -> None:
    job = running_job(client)
    point = {"rank": 0, "name": "loss", "step": 3, "value": 0.5}
    client.post(
        f"{API}/jobs/{job.id}/metrics",
        json={"task_id": job.alice_task, "points": [point]},
        headers=job.alice.auth,
    )
    response = client.get(f"{API}/jobs/{job.id}/events?once=true", headers=job.bob.auth)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse(response.text)
    job_moves = [(e["from"], e["to"]) for e in events if e["event"] == "job.status"]
    assert job_moves == [(None, "pending"), ("pending", "queued"), ("queued", "running")]
    [metrics] = [e for e in events if e["event"] == "metrics"]
    assert metrics["last"] == {"loss": 0.5} and metrics["last_step"] == 3
    ids = [e["id"] for e in events]
    assert ids == sorted(ids)
    report(client, job.alice, job.alice_task, status="failed", reason="boom")
    rest = client.get(
        f"{API}/jobs/{job.id}/events", headers={**ADMIN, "Last-Event-ID": str(ids[-1])}
    )
    later = parse(rest.text)
    assert later and min(e["id"] for e in later) > ids[-1]
    assert ("running", "failed") in [(e.get("from"), e.get("to")) for e in later]


def test_once_and_the_stream_send_the_same_events_past_one_read(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tessera_api.routes import events as events_route

    monkeypatch.setattr(events_route, "BATCH", 2)  # reads of two events: many reads
    job = running_job(client)
    for step in range(5):
        point = {"rank": 0, "name": "loss", "step": step, "value": 1.0 / (step + 1)}
        sent = client.post(
            f"{API}/jobs/{job.id}/metrics",
            json={"task_id": job.alice_task, "points": [point]},
            headers=job.alice.auth,
        )
        assert sent.status_code == 204
    once = client.get(f"{API}/jobs/{job.id}/events?once=true", headers=ADMIN)
    assert once.text.startswith("retry: 2000\n\n")
    stored = parse(once.text)
    assert [e["last_step"] for e in stored if e["event"] == "metrics"] == [0, 1, 2, 3, 4]
    streamed = client.get(f"{API}/jobs/{job.id}/events?timeout_s=0.3", headers=ADMIN)
    assert parse(streamed.text) == stored
    after = client.get(
        f"{API}/jobs/{job.id}/events?once=true&after={stored[2]['id']}", headers=ADMIN
    )
    assert parse(after.text) == stored[3:]


def test_stream_of_a_live_job_ends_at_its_timeout(client: TestClient) -> None:
    job = running_job(client)
    response = client.get(f"{API}/jobs/{job.id}/events?timeout_s=0.3", headers=ADMIN)
    assert response.status_code == 200
    assert parse(response.text)[-1]["to"] in {"running", "assigned"}


def test_stream_needs_a_role_in_the_job(client: TestClient) -> None:
    job = running_job(client)
    from tests.backend.factories import create_party

    stranger = create_party(client)
    response = client.get(f"{API}/jobs/{job.id}/events?once=true", headers=stranger.auth)
    assert response.status_code == 403
    assert response.headers["content-type"].startswith("application/problem+json")


def test_a_live_stream_holds_no_database_connection_between_polls(client: TestClient) -> None:
    job = running_job(client)
    app: Any = client.app
    held = []
    with client.stream("GET", f"{API}/jobs/{job.id}/events?timeout_s=1.5", headers=ADMIN) as r:
        for _ in r.iter_lines():
            held.append(app.state.engine.pool.checkedout())
            if len(held) >= 3:
                break
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            held.append(app.state.engine.pool.checkedout())
            time.sleep(0.02)
    assert min(held) == 0, held


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` behind a real uvicorn on a free port (its lifespan is the caller's business):
    the test client does not stream a response while it is being produced."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def _stream_while(reader: Any, job_id: str, write: Callable[[], None]) -> list[str]:
    """The lines a stream of ``job_id`` served by ``reader`` shows until a task's failure,
    while ``write`` fails it meanwhile. A stream reads, then sleeps until woken; one that
    nobody woke would say ``: keep-alive`` (after ``KEEPALIVE_S``) before it read again."""
    seen: list[str] = []
    writer = threading.Thread(target=lambda: (time.sleep(0.3), write()))
    with (
        serving(reader) as url,
        httpx.stream(
            "GET", f"{url}{API}/jobs/{job_id}/events?timeout_s=30", headers=ADMIN, timeout=60
        ) as response,
    ):
        for line in response.iter_lines():
            seen.append(line)
            if line.startswith("id: ") and writer.ident is None:
                writer.start()  # the stored events are being served: the stream is open
            if line.startswith("data: ") and '"to": "failed"' in line:
                break
    writer.join()
    return seen


def test_a_commit_wakes_the_streams_of_its_job(client: TestClient) -> None:
    job = running_job(client)
    seen = _stream_while(
        client.app, job.id, lambda: report(client, job.alice, job.alice_task, status="failed")
    )
    assert ": keep-alive" not in seen


@pytest.mark.postgres
def test_a_stream_on_one_replica_sees_events_stored_through_another(
    fresh_postgres_url: str, tmp_path: Path
) -> None:
    from tests.backend.conftest import _client, _prepared

    _prepared(fresh_postgres_url)
    replicas = (
        _client(fresh_postgres_url, tmp_path / "a"),
        _client(fresh_postgres_url, tmp_path / "b"),
    )
    one, two = (next(r) for r in replicas)
    try:
        job = running_job(one)
        seen = _stream_while(
            one.app, job.id, lambda: report(two, job.alice, job.alice_task, status="failed")
        )
        assert ": keep-alive" not in seen
    finally:
        for replica in replicas:
            next(replica, None)
