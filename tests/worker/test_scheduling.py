"""The scheduler behind the control plane's dispatcher seam, over a real SQLite database.

The broker is replaced by a recorder of what would be sent; the end-to-end tests use Redis.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tessera_api.app import create_app
from tessera_api.models import Base, Worker, utcnow
from tessera_api.scheduling.scheduler import Scheduler
from tessera_api.settings import Settings
from tessera_worker import hardware
from tessera_worker.agent import Agent
from tessera_worker.client import ControlPlane

ADMIN = {"Authorization": "Bearer scheduling-admin-token-0123"}
GIB = 1024**3


@dataclass
class Recorder:
    sent: list[dict[str, Any]] = field(default_factory=list)
    refuse: int = 0

    def send(self, *, party: str, worker_id: str, job_id: str, attempt: int, task_id: str) -> None:
        if self.refuse:
            self.refuse -= 1
            raise ConnectionError("broker down")
        self.sent.append({"party": party, "worker_id": worker_id, "task_id": task_id})


@dataclass
class Plane:
    client: TestClient
    scheduler: Scheduler
    sender: Recorder
    tokens: dict[str, str]

    def register(self, party: str, hostname: str, gpus: int = 0) -> str:
        body = {
            "hostname": hostname,
            "address": "127.0.0.1",
            "cpu_count": 4,
            "memory_bytes": 8 * GIB,
            "torch_version": "x",
            "accelerators": [{"name": "gpu", "total_memory": 80 * GIB, "free_memory": 70 * GIB}]
            * gpus,
        }
        auth = {"Authorization": f"Bearer {self.tokens[party]}"}
        response = self.client.post("/api/v1/workers", json=body, headers=auth)
        assert response.status_code in (200, 201), response.text
        return str(response.json()["id"])

    def create_job(self, *parties: str) -> str:
        body = {
            "name": "j",
            "algorithm": "ddp",
            "config": {"steps": 5},
            "assignments": [{"party": p, "role": "trainer"} for p in parties],
        }
        response = self.client.post("/api/v1/jobs", json=body, headers=ADMIN)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.client.get(f"/api/v1/jobs/{job_id}", headers=ADMIN).json()
        return result


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[Plane]:
    settings = Settings(
        home=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
        admin_token=ADMIN["Authorization"].split()[1],
    )
    sender = Recorder()
    holder: list[Any] = []
    scheduler = Scheduler(lambda: holder[0](), sender, offline_after_s=30, interval_s=3600)
    app = create_app(settings, dispatcher=scheduler)
    holder.append(app.state.session_factory)
    Base.metadata.create_all(app.state.engine)
    with TestClient(app) as client:
        tokens = {}
        for name in ("alice", "bob"):
            response = client.post("/api/v1/parties", json={"name": name}, headers=ADMIN)
            tokens[name] = response.json()["token"]
        yield Plane(client, scheduler, sender, tokens)
    app.state.engine.dispose()


def test_a_job_waits_for_a_party_then_starts_when_its_worker_registers(plane: Plane) -> None:
    alice = plane.register("alice", "a1")
    job_id = plane.create_job("alice", "bob")

    job = plane.job(job_id)
    assert (job["status"], job["status_reason"]) == ("queued", "waiting for a worker of party bob")
    assert plane.sender.sent == []

    bob = plane.register("bob", "b1")
    plane.scheduler.tick()

    job = plane.job(job_id)
    assert job["status"] == "running"
    tasks = {t["party"]: t for t in job["attempts"][-1]["tasks"]}
    assert {p: (t["worker_id"], t["ranks"]) for p, t in tasks.items()} == {
        "alice": (alice, [{"rank": 0, "device": "cpu"}]),
        "bob": (bob, [{"rank": 1, "device": "cpu"}]),
    }
    assert sorted((s["party"], s["worker_id"], s["task_id"]) for s in plane.sender.sent) == [
        ("alice", alice, tasks["alice"]["id"]),
        ("bob", bob, tasks["bob"]["id"]),
    ]


def test_every_rank_on_a_gpu_runs_nccl(plane: Plane) -> None:
    plane.register("alice", "a1", gpus=2)
    plane.register("bob", "b1", gpus=1)
    job_id = plane.create_job("alice", "bob")

    tasks = plane.job(job_id)["attempts"][-1]["tasks"]
    devices = sorted(r["device"] for t in tasks for r in t["ranks"])
    assert devices == ["cuda:0", "cuda:0"]
    auth = {"Authorization": f"Bearer {plane.tokens['bob']}"}
    bob_task = next(t for t in tasks if t["party"] == "bob")
    launch = plane.client.get(f"/api/v1/tasks/{bob_task['id']}", headers=auth).json()
    assert launch["backend"] == "nccl"


def test_a_running_task_whose_worker_goes_offline_fails_the_attempt(plane: Plane) -> None:
    plane.register("alice", "a1")
    bob = plane.register("bob", "b1")
    job_id = plane.create_job("alice", "bob")
    assert plane.job(job_id)["status"] == "running"

    with plane.client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        worker = session.get(Worker, bob)
        worker.last_heartbeat = utcnow() - timedelta(minutes=5)
        session.commit()
    plane.scheduler.tick()

    job = plane.job(job_id)
    assert job["status"] == "failed"
    assert job["status_reason"] == "party bob rank 1: worker b1 went offline"


def test_a_message_the_broker_refused_is_sent_on_the_next_pass(plane: Plane) -> None:
    plane.register("alice", "a1")
    plane.sender.refuse = 1
    job_id = plane.create_job("alice")
    assert plane.job(job_id)["status"] == "running"
    assert plane.sender.sent == []

    plane.scheduler.tick()

    (task,) = plane.job(job_id)["attempts"][-1]["tasks"]
    assert [s["task_id"] for s in plane.sender.sent] == [task["id"]]


def test_the_heartbeat_reply_stops_the_tasks_of_a_cancelled_job(plane: Plane) -> None:
    api = ControlPlane("http://testserver", plane.tokens["alice"], http=plane.client)
    agent = Agent(api, describe=lambda: hardware.describe("a1", "127.0.0.1"), accelerators=list)
    alice = agent.register()
    plane.register("bob", "b1")
    job_id = plane.create_job("alice", "bob")
    tasks = plane.job(job_id)["attempts"][-1]["tasks"]
    (mine,) = [t["id"] for t in tasks if t["worker_id"] == alice]

    with agent.track(mine) as stop:
        assert agent.beat() == []
        assert not stop.is_set()
        response = plane.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=ADMIN)
        assert response.status_code == 200, response.text
        assert agent.beat() == [mine]
        assert stop.is_set()
    assert plane.job(job_id)["status"] == "cancelling"
