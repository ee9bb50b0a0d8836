"""Build parties, workers and jobs through the API, and start attempts like a scheduler."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient

from tessera_api.services.lifecycle import Placement, RankDevice, start_attempt
from tests.backend.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
API = "/api/v1"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class PartyRef:
    name: str
    token: str
    id: str

    @property
    def auth(self) -> dict[str, str]:
        return bearer(self.token)


def create_party(
    client: TestClient, name: str | None = None, *, approves_admin: bool = True
) -> PartyRef:
    """A new party; unless ``approves_admin`` is False its policy approves the admin's jobs,
    so tests about something else need not approve every job."""
    name = name or f"p-{uuid.uuid4().hex[:8]}"
    response = client.post(f"{API}/parties", json={"name": name}, headers=ADMIN)
    assert response.status_code == 201, response.text
    body = response.json()
    party = PartyRef(name=name, token=body["token"], id=body["id"])
    if approves_admin:
        set_policy(client, party, auto_approve_from=["admin"])
    return party


def set_policy(client: TestClient, party: PartyRef, **policy: Any) -> dict[str, Any]:
    body = {"auto_approve_from": [], "algorithms": None, "custom_code": False, **policy}
    response = client.put(f"{API}/parties/{party.name}/policy", json=body, headers=party.auth)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def register_worker(client: TestClient, party: PartyRef, hostname: str = "host-1") -> str:
    response = client.post(
        f"{API}/workers",
        json={"hostname": hostname, "cpu_count": 2, "memory_bytes": 2**30},
        headers=party.auth,
    )
    assert response.status_code == 201, response.text
    worker_id: str = response.json()["id"]
    return worker_id


def create_job(
    client: TestClient,
    assignments: list[dict[str, Any]],
    *,
    algorithm: str = "solo",
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body = {"name": "job", "algorithm": algorithm, "assignments": assignments, **extra}
    response = client.post(f"{API}/jobs", json=body, headers=headers or ADMIN)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


def get_job(client: TestClient, job_id: str) -> dict[str, Any]:
    response = client.get(f"{API}/jobs/{job_id}", headers=ADMIN)
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()
    return job


def start(client: TestClient, job_id: str, workers: dict[str, tuple[str, list[int]]]) -> list[str]:
    """Place a queued job: ``workers`` maps party name to (worker id, hosted ranks).

    Returns the task ids in the order of ``workers``.
    """
    app: Any = client.app
    placements = [
        Placement(party=p, worker_id=w, ranks=[RankDevice(rank=r, device="cpu") for r in ranks])
        for p, (w, ranks) in workers.items()
    ]
    with app.state.session_factory() as session:
        start_attempt(session, job_id=job_id, placements=placements)
        session.commit()
    tasks = get_job(client, job_id)["attempts"][-1]["tasks"]
    by_party = {t["party"]: t["id"] for t in tasks}
    return [by_party[p] for p in workers]


@dataclass
class RunningJob:
    """A running two-party job with one task per party (alice hosts rank 0, bob rank 1)."""

    id: str
    alice: PartyRef
    bob: PartyRef
    alice_task: str
    bob_task: str
    alice_worker: str
    bob_worker: str


def running_job(client: TestClient) -> RunningJob:
    alice, bob = create_party(client), create_party(client)
    wa, wb = register_worker(client, alice), register_worker(client, bob)
    job = create_job(
        client, [{"party": alice.name, "role": "trainer"}, {"party": bob.name, "role": "trainer"}]
    )
    ta, tb = start(client, job["id"], {alice.name: (wa, [0]), bob.name: (wb, [1])})
    return RunningJob(job["id"], alice, bob, ta, tb, wa, wb)


def report(client: TestClient, party: PartyRef, task_id: str, **body: Any) -> dict[str, Any]:
    response = client.post(f"{API}/tasks/{task_id}/status", json=body, headers=party.auth)
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()
    return task
