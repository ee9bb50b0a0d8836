"""Parties: the one-time token, reading, updating and disabling."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from tessera_api.models import Party
from tests.backend.factories import ADMIN, API, create_job, create_party, get_job, running_job


def test_token_is_shown_once_and_stored_hashed(client: TestClient) -> None:
    party = create_party(client, "alice")
    assert party.token.startswith("tsp_")
    shown = client.get(f"{API}/parties/alice", headers=party.auth).json()
    assert "token" not in shown and shown["display_name"] == "alice"
    app: Any = client.app
    with app.state.session_factory() as session:
        row = session.scalars(select(Party).where(Party.name == "alice")).one()
        assert party.token not in row.token_hash and len(row.token_hash) == 64


def test_duplicate_and_malformed_names(client: TestClient) -> None:
    create_party(client, "bob")
    again = client.post(f"{API}/parties", json={"name": "bob"}, headers=ADMIN)
    assert again.status_code == 409 and again.json()["code"] == "party_exists"
    bad = client.post(f"{API}/parties", json={"name": "Bob Smith"}, headers=ADMIN)
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["body", "name"]


def test_update_and_disable(client: TestClient) -> None:
    party = create_party(client, "carol")
    patched = client.patch(
        f"{API}/parties/carol",
        json={"display_name": "Carol Ltd", "description": "x"},
        headers=ADMIN,
    ).json()
    assert (patched["display_name"], patched["description"]) == ("Carol Ltd", "x")
    assert client.post(f"{API}/parties/carol/disable", headers=ADMIN).json()["disabled"] is True
    refused = client.get(f"{API}/parties/carol", headers=party.auth)
    assert refused.status_code == 403 and refused.json()["code"] == "party_disabled"
    enabled = client.patch(f"{API}/parties/carol", json={"disabled": False}, headers=ADMIN)
    assert enabled.json()["disabled"] is False
    assert client.get(f"{API}/parties/carol", headers=party.auth).status_code == 200


def test_list_is_paginated_and_scoped(client: TestClient) -> None:
    parties = [create_party(client, f"p{i}") for i in range(3)]
    page = client.get(f"{API}/parties?limit=2&offset=1", headers=ADMIN).json()
    assert page["count"] == 3 and [p["name"] for p in page["data"]] == ["p1", "p2"]
    own = client.get(f"{API}/parties", headers=parties[0].auth).json()
    assert [p["name"] for p in own["data"]] == ["p0"]


def test_disabling_a_party_cuts_off_its_workers_and_its_jobs(client: TestClient) -> None:
    job = running_job(client)
    waiting = create_job(client, [{"party": job.bob.name, "role": "trainer"}])

    response = client.post(f"{API}/parties/{job.bob.name}/disable", headers=ADMIN)

    assert response.status_code == 200
    failed = get_job(client, job.id)
    assert failed["status"] == "failed"
    assert f"party {job.bob.name} was disabled" in failed["status_reason"]
    assert get_job(client, waiting["id"])["status"] == "cancelled"
    beat = client.post(
        f"{API}/workers/{job.bob_worker}/heartbeat",
        json={"running_tasks": [job.bob_task]},
        headers=job.bob.auth,
    )
    assert beat.status_code == 403
    assert beat.json()["code"] == "party_disabled"
    assert "cut off" in beat.json()["detail"]
    alice_beat = client.post(
        f"{API}/workers/{job.alice_worker}/heartbeat",
        json={"running_tasks": [job.alice_task]},
        headers=job.alice.auth,
    )
    assert alice_beat.json()["stop_tasks"] == [job.alice_task]


def test_every_party_sees_the_directory_of_enabled_parties(client: TestClient) -> None:
    a, b, c = (create_party(client, name) for name in ("dir-a", "dir-b", "dir-c"))
    client.patch(f"{API}/parties/{b.name}", json={"display_name": "Bee"}, headers=ADMIN)
    client.post(f"{API}/parties/{c.name}/disable", headers=ADMIN)

    response = client.get(f"{API}/party-directory", headers=a.auth)

    assert response.status_code == 200, response.text
    assert response.json() == {
        "data": [
            {"name": "dir-a", "display_name": "dir-a"},
            {"name": "dir-b", "display_name": "Bee"},
        ],
        "count": 2,
    }
    assert client.get(f"{API}/parties/{b.name}", headers=a.auth).status_code == 403
