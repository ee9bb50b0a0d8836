"""Worker registration, heartbeats and online status."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient

from tessera_api.models import Worker, utcnow
from tests.backend.factories import ADMIN, API, create_party, register_worker


def test_register_again_updates_the_same_worker(client: TestClient) -> None:
    party = create_party(client)
    first = register_worker(client, party, "gpu-box")
    body = {
        "hostname": "gpu-box",
        "address": "10.0.0.7",
        "cpu_count": 64,
        "memory_bytes": 2**40,
        "torch_version": "2.13.0",
        "accelerators": [{"name": "H200", "total_memory": 2**37, "free_memory": 2**36}],
    }
    again = client.post(f"{API}/workers", json=body, headers=party.auth).json()
    assert again["id"] == first
    assert again["cpu_count"] == 64 and again["accelerators"][0]["name"] == "H200"
    assert client.get(f"{API}/workers", headers=ADMIN).json()["count"] == 1


def test_admin_cannot_register_a_worker(client: TestClient) -> None:
    body = {"hostname": "h", "cpu_count": 1, "memory_bytes": 1}
    response = client.post(f"{API}/workers", json=body, headers=ADMIN)
    assert response.status_code == 403 and response.json()["code"] == "party_only"


def test_online_follows_heartbeat_age(client: TestClient) -> None:
    party, other = create_party(client), create_party(client)
    worker = register_worker(client, party)
    register_worker(client, other)
    listed = client.get(f"{API}/workers?party={party.name}", headers=ADMIN).json()
    assert listed["count"] == 1 and listed["data"][0]["online"] is True
    app: Any = client.app
    with app.state.session_factory() as session:
        row = session.get(Worker, worker)
        assert row is not None
        row.last_heartbeat = utcnow() - timedelta(seconds=120)
        session.commit()
    listed = client.get(f"{API}/workers", headers=party.auth).json()
    assert [w["online"] for w in listed["data"]] == [False]
    beat = client.post(
        f"{API}/workers/{worker}/heartbeat",
        json={"running_tasks": [], "accelerators": []},
        headers=party.auth,
    )
    assert beat.status_code == 200 and beat.json()["stop_tasks"] == []
    assert client.get(f"{API}/workers", headers=party.auth).json()["data"][0]["online"] is True
    foreign = client.post(
        f"{API}/workers/{worker}/heartbeat", json={"running_tasks": []}, headers=other.auth
    )
    assert foreign.status_code == 403
