"""Status changes made at the same time by different sessions see each other (SQLite, PostgreSQL).

Each test holds one session's change uncommitted while a second session makes its own in a
thread; the second must wait for the first and build on it, not overwrite it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tessera_api.models import Job, Task
from tessera_api.schemas import MetricPointIn
from tessera_api.services.lifecycle import (
    Placement,
    RankDevice,
    cancel_job,
    report_task_status,
    start_attempt,
)
from tessera_api.services.telemetry import ingest_metrics
from tessera_api.states import TaskStatus
from tests.backend.factories import (
    ADMIN,
    API,
    create_job,
    create_party,
    get_job,
    register_worker,
    running_job,
)


def _while_uncommitted(
    first: Session, second: Callable[[Session], None], client: TestClient
) -> None:
    """Run ``second`` in its own session while ``first`` holds its changes, then commit both."""
    app: Any = client.app
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with app.state.session_factory() as session:
                second(session)
                session.commit()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        thread.join(0.5)
        assert thread.is_alive(), "the second change did not wait for the first"
        first.commit()
    finally:
        first.close()
        thread.join(30)
    assert not thread.is_alive() and not errors, errors


def _succeed(task_id: str) -> Callable[[Session], None]:
    def report(session: Session) -> None:
        task = session.get(Task, task_id)
        assert task is not None
        report_task_status(
            session, task=task, status=TaskStatus.succeeded, reason=None, exit_code=0, rank=None
        )

    return report


def test_two_tasks_finishing_together_succeed_the_job(client: TestClient) -> None:
    job = running_job(client)
    app: Any = client.app
    first = app.state.session_factory()
    _succeed(job.alice_task)(first)

    _while_uncommitted(first, _succeed(job.bob_task), client)

    state = get_job(client, job.id)
    assert (state["status"], state["attempts"][0]["status"]) == ("succeeded", "succeeded")


def test_a_cancel_during_placement_waits_and_cancels_the_started_attempt(
    client: TestClient,
) -> None:
    party = create_party(client)
    worker = register_worker(client, party)
    job = create_job(client, [{"party": party.name, "role": "trainer"}])
    app: Any = client.app
    first = app.state.session_factory()
    placement = Placement(party=party.name, worker_id=worker, ranks=[RankDevice(0, "cpu")])
    start_attempt(first, job_id=job["id"], placements=[placement])

    def cancel(session: Session) -> None:
        row = session.get(Job, job["id"])
        assert row is not None
        cancel_job(session, job=row)

    _while_uncommitted(first, cancel, client)

    state = get_job(client, job["id"])
    assert (state["status"], state["attempts"][0]["status"]) == ("cancelled", "cancelled")
    assert [t["status"] for t in state["attempts"][0]["tasks"]] == ["cancelled"]


def _ingest(task_id: str, step: int) -> Callable[[Session], None]:
    def post(session: Session) -> None:
        task = session.get(Task, task_id)
        assert task is not None
        point = MetricPointIn(rank=0, name="loss", step=step, value=1.0 / step)
        ingest_metrics(session, job_id=task.attempt.job_id, task=task, points=[point])

    return post


def test_two_batches_of_one_series_at_once_both_count(client: TestClient) -> None:
    job = running_job(client)
    app: Any = client.app
    first = app.state.session_factory()
    _ingest(job.alice_task, 1)(first)

    _while_uncommitted(first, _ingest(job.alice_task, 2), client)

    response = client.get(f"{API}/jobs/{job.id}/metrics", params={"names": "loss"}, headers=ADMIN)
    [series] = response.json()["series"]
    assert [p["step"] for p in series["points"]] == [1, 2]
