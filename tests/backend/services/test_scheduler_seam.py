"""The service functions a scheduler builds on: queue order, waiting reasons, failing a job."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tessera_api.errors import ApiError
from tessera_api.models import Worker, utcnow
from tessera_api.services.lifecycle import fail_queued, queued_jobs, set_queued_reason
from tessera_api.services.workers import online_workers
from tests.backend.factories import API, create_job, create_party, get_job, register_worker


def session_of(client: TestClient) -> Any:
    app: Any = client.app
    return app.state.session_factory()


def test_queue_order_and_waiting_reason(client: TestClient) -> None:
    party = create_party(client)
    low = create_job(client, [{"party": party.name, "role": "trainer"}], priority=0)
    high = create_job(client, [{"party": party.name, "role": "trainer"}], priority=5)
    later = create_job(client, [{"party": party.name, "role": "trainer"}], priority=0)
    with session_of(client) as session:
        order = [j.id for j in queued_jobs(session)]
        assert order == [high["id"], low["id"], later["id"]]
        set_queued_reason(
            session, job_id=low["id"], reason=f"waiting for a worker of party {party.name}"
        )
        session.commit()
    assert (
        get_job(client, low["id"])["status_reason"] == f"waiting for a worker of party {party.name}"
    )
    events = client.get(
        f"{API}/jobs/{low['id']}/events?once=true",
        headers={"Authorization": "Bearer " + party.token},
    ).text
    assert "event: job.reason" in events


def test_fail_queued_fails_job_and_attempt(client: TestClient) -> None:
    party = create_party(client)
    job = create_job(client, [{"party": party.name, "role": "trainer"}])
    with session_of(client) as session:
        fail_queued(session, job_id=job["id"], code="unplaceable", reason="no GPU at party x")
        session.commit()
        with pytest.raises(ApiError, match="not queued"):
            set_queued_reason(session, job_id=job["id"], reason="r")
    state = get_job(client, job["id"])
    assert (state["status"], state["status_reason"]) == ("failed", "no GPU at party x")
    assert state["attempts"][0]["failure_code"] == "unplaceable"


def test_online_workers_follow_heartbeats(client: TestClient) -> None:
    party = create_party(client)
    fresh = register_worker(client, party, "fresh")
    stale = register_worker(client, party, "stale")
    with session_of(client) as session:
        row = session.get(Worker, stale)
        row.last_heartbeat = utcnow() - timedelta(minutes=5)
        session.commit()
        assert [w.id for w in online_workers(session, party_id=party.id, offline_after_s=30)] == [
            fresh
        ]
