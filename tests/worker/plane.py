"""A control plane with the real scheduler over SQLite, in process; the broker is a recorder."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tessera_api.app import create_app
from tessera_api.models import Base
from tessera_api.scheduling.scheduler import Scheduler
from tessera_api.settings import Settings

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

    def create_job(self, *parties: str, device: str = "auto") -> str:
        body = {
            "name": "j",
            "algorithm": "ddp",
            "config": {"steps": 5},
            "assignments": [{"party": p, "role": "trainer"} for p in parties],
            "device": device,
        }
        response = self.client.post("/api/v1/jobs", json=body, headers=ADMIN)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.client.get(f"/api/v1/jobs/{job_id}", headers=ADMIN).json()
        return result


def running_plane(tmp_path: Path) -> Iterator[Plane]:
    """Parties alice and bob; the scheduler places at submit and on ``tick()`` only."""
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
            policy = {"auto_approve_from": ["admin"], "algorithms": None, "custom_code": False}
            auth = {"Authorization": f"Bearer {tokens[name]}"}
            client.put(f"/api/v1/parties/{name}/policy", json=policy, headers=auth)
        yield Plane(client, scheduler, sender, tokens)
    app.state.engine.dispose()
