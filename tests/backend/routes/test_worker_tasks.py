"""What the dashboard shows of placement: each worker's unfinished tasks, each rank's role."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.backend.factories import ADMIN, API, get_job, report, running_job


def _held(client: TestClient, worker_id: str, headers: dict[str, str]) -> list[dict[str, str]]:
    workers = client.get(f"{API}/workers", headers=headers).json()["data"]
    return next(w["running_tasks"] for w in workers if w["id"] == worker_id)


def test_workers_list_their_unfinished_tasks(client: TestClient) -> None:
    world = running_job(client)
    held = _held(client, world.alice_worker, ADMIN)
    assert held == [
        {"task_id": world.alice_task, "job_id": world.id, "job_name": "job", "status": "assigned"}
    ]
    assert _held(client, world.bob_worker, world.bob.auth)[0]["task_id"] == world.bob_task

    report(client, world.alice, world.alice_task, status="starting")
    report(client, world.alice, world.alice_task, status="running")
    assert _held(client, world.alice_worker, ADMIN)[0]["status"] == "running"
    report(client, world.alice, world.alice_task, status="succeeded")
    assert _held(client, world.alice_worker, ADMIN) == []


def test_task_ranks_carry_their_role(client: TestClient) -> None:
    world = running_job(client)
    tasks = get_job(client, world.id)["attempts"][-1]["tasks"]
    ranks = {r["rank"]: r["role"] for t in tasks for r in t["ranks"]}
    assert ranks == {0: "trainer", 1: "trainer"}
    task = client.get(f"{API}/tasks/{world.alice_task}", headers=world.alice.auth).json()
    assert task["ranks"] == [{"rank": 0, "device": "cpu", "role": "trainer", "backend": "gloo"}]
