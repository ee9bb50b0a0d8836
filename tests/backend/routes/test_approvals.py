"""Consent: jobs wait for every party's approval, one rejection ends them, policies decide."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tessera_api.app import create_app
from tessera_api.settings import Settings
from tests.backend.conftest import ADMIN_TOKEN
from tests.backend.factories import (
    ADMIN,
    API,
    PartyRef,
    create_job,
    create_party,
    get_job,
    set_policy,
)
from tests.backend.routes.test_events import parse

CUSTOM = {"model": {"kind": "custom", "target": "subprocess:run", "kwargs": {"args": ["env"]}}}


def solo(*parties: PartyRef) -> list[dict[str, Any]]:
    return [{"party": p.name, "role": "trainer"} for p in parties]


def decide(
    client: TestClient, job_id: str, party: PartyRef | None, verb: str, reason: str = ""
) -> Any:
    headers = ADMIN if party is None else party.auth
    return client.post(f"{API}/jobs/{job_id}/{verb}", json={"reason": reason}, headers=headers)


def events(client: TestClient, job_id: str) -> list[dict[str, Any]]:
    response = client.get(f"{API}/jobs/{job_id}/events?once=true", headers=ADMIN)
    assert response.status_code == 200
    return parse(response.text)


def test_a_job_waits_for_the_parties_that_have_not_approved(client: TestClient) -> None:
    alice = create_party(client)
    carol = create_party(client, approves_admin=False)
    dave = create_party(client, approves_admin=False)

    job = create_job(client, solo(alice, carol, dave))

    assert job["status"] == "pending"
    assert job["status_reason"] == f"waiting for approval by {carol.name} and {dave.name}"
    assert job["waiting_for"] == [carol.name, dave.name]
    decisions = {a["party"]: (a["decision"], a["decided_by"]) for a in job["approvals"]}
    assert decisions == {
        alice.name: ("approved", "policy"),
        carol.name: ("pending", None),
        dave.name: ("pending", None),
    }

    approved = decide(client, job["id"], carol, "approve", "looks fine")
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "pending"
    assert approved.json()["status_reason"] == f"waiting for approval by {dave.name}"

    last = decide(client, job["id"], dave, "approve")
    assert last.status_code == 200
    assert last.json()["status"] == "queued"
    assert last.json()["waiting_for"] == []


def test_the_creating_party_approves_by_creating(client: TestClient) -> None:
    alice, carol = create_party(client), create_party(client, approves_admin=False)
    job = create_job(client, solo(alice, carol), headers=alice.auth)
    decisions = {a["party"]: (a["decision"], a["decided_by"]) for a in job["approvals"]}
    assert decisions == {alice.name: ("approved", alice.name), carol.name: ("pending", None)}
    assert job["status_reason"] == f"waiting for approval by {carol.name}"


def test_a_party_approves_only_for_itself(client: TestClient) -> None:
    alice = create_party(client, approves_admin=False)
    carol = create_party(client, approves_admin=False)
    job = create_job(client, solo(alice, carol), headers=alice.auth)

    again = decide(client, job["id"], alice, "approve")

    assert again.status_code == 200
    assert again.json()["status"] == "pending"
    assert again.json()["waiting_for"] == [carol.name]


def test_only_a_party_with_a_role_may_answer(client: TestClient) -> None:
    alice, carol = create_party(client), create_party(client, approves_admin=False)
    stranger = create_party(client)
    job = create_job(client, solo(alice, carol))

    for verb in ("approve", "reject"):
        hidden = decide(client, job["id"], stranger, verb)
        assert hidden.status_code == 404, hidden.text
        assert hidden.json()["code"] == "not_found"
        admin = decide(client, job["id"], None, verb)
        assert admin.status_code == 403, admin.text
        assert admin.headers["content-type"].startswith("application/problem+json")
    assert get_job(client, job["id"])["waiting_for"] == [carol.name]


def test_a_rejection_ends_the_job_with_the_party_and_its_reason(client: TestClient) -> None:
    alice, carol = create_party(client), create_party(client, approves_admin=False)
    job = create_job(client, solo(alice, carol))

    rejected = decide(client, job["id"], carol, "reject", "our data may not leave for this")

    assert rejected.status_code == 200
    body = rejected.json()
    assert body["status"] == "rejected"
    assert body["status_reason"] == f"rejected by {carol.name}: our data may not leave for this"
    assert body["attempts"][-1]["status"] == "cancelled"
    late = decide(client, job["id"], carol, "approve")
    assert late.status_code == 409
    assert late.json()["code"] == "approval_closed"

    transitions = client.get(f"{API}/jobs/{job['id']}/transitions", headers=ADMIN).json()
    answers = [t for t in transitions if t["entity"] == "approval"]
    assert [a["to_status"] for a in answers] == ["approved", "rejected"]
    assert answers[-1]["reason"] == f"{carol.name} rejected: our data may not leave for this"
    answered = [e for e in events(client, job["id"]) if e["event"] == "approval"]
    assert [(e["party"], e["decision"]) for e in answered] == [
        (alice.name, "approved"),
        (carol.name, "rejected"),
    ]


def test_retrying_a_rejected_job_asks_again(client: TestClient) -> None:
    alice, carol = create_party(client), create_party(client, approves_admin=False)
    job = create_job(client, solo(alice, carol))
    decide(client, job["id"], carol, "reject", "not now")

    retried = client.post(f"{API}/jobs/{job['id']}/retry", headers=ADMIN)

    assert retried.status_code == 200, retried.text
    assert retried.json()["status"] == "pending"
    assert retried.json()["status_reason"] == f"waiting for approval by {carol.name}"
    assert decide(client, job["id"], carol, "approve").json()["status"] == "queued"


def test_a_retry_by_one_party_asks_the_others_again(client: TestClient) -> None:
    """Alice approved bob's job by hand and cancelled it; bob's retry does not run on her
    workers until she approves again."""
    bob, alice = create_party(client), create_party(client, approves_admin=False)
    job = create_job(client, solo(bob, alice), headers=bob.auth)
    assert decide(client, job["id"], alice, "approve").json()["status"] == "queued"
    cancelled = client.post(f"{API}/jobs/{job['id']}/cancel", headers=alice.auth)
    assert cancelled.json()["status"] == "cancelled", cancelled.text

    retried = client.post(f"{API}/jobs/{job['id']}/retry", headers=bob.auth)

    assert retried.status_code == 200, retried.text
    body = retried.json()
    assert body["status"] == "pending"
    assert body["status_reason"] == f"waiting for approval by {alice.name}"
    decisions = {a["party"]: (a["decision"], a["decided_by"]) for a in body["approvals"]}
    assert decisions == {bob.name: ("approved", bob.name), alice.name: ("pending", None)}


def test_a_retry_asks_again_a_party_that_rejected_even_if_its_policy_approves_the_retrier(
    client: TestClient,
) -> None:
    alice, bob = create_party(client), create_party(client, approves_admin=False)
    carol = create_party(client, approves_admin=False)
    set_policy(client, alice, auto_approve_from=[bob.name])
    job = create_job(client, solo(bob, alice, carol), headers=bob.auth)
    assert decide(client, job["id"], alice, "reject", "not this one").status_code == 200

    retried = client.post(f"{API}/jobs/{job['id']}/retry", headers=bob.auth).json()

    decisions = {a["party"]: a["decision"] for a in retried["approvals"]}
    assert decisions == {bob.name: "approved", alice.name: "pending", carol.name: "pending"}


def test_a_retry_is_refused_where_a_partys_policy_no_longer_allows_the_job(
    client: TestClient,
) -> None:
    bob, alice = create_party(client), create_party(client)  # alice approves the admin's jobs
    job = create_job(client, solo(bob, alice))
    client.post(f"{API}/jobs/{job['id']}/cancel", headers=ADMIN)
    set_policy(client, alice, auto_approve_from=["admin"], algorithms=["split"])

    retried = client.post(f"{API}/jobs/{job['id']}/retry", headers=bob.auth)

    assert retried.status_code == 409, retried.text
    assert retried.json()["code"] == "policy_forbids"
    assert alice.name in retried.json()["detail"]
    after = get_job(client, job["id"])
    assert after["status"] == "cancelled" and len(after["attempts"]) == 1  # nothing half-made


def test_pending_approvals_are_listed_for_the_party_that_must_answer(client: TestClient) -> None:
    alice, carol = create_party(client), create_party(client, approves_admin=False)
    waiting = create_job(client, solo(alice, carol))
    create_job(client, solo(alice))

    def awaiting(party: PartyRef) -> list[str]:
        response = client.get(f"{API}/jobs?awaiting_approval=true", headers=party.auth)
        assert response.status_code == 200
        return [j["id"] for j in response.json()["data"]]

    assert awaiting(carol) == [waiting["id"]]
    assert awaiting(alice) == []


def test_a_policy_defaults_to_safe_and_is_the_partys_own(client: TestClient) -> None:
    alice, carol = create_party(client), create_party(client, approves_admin=False)

    own = client.get(f"{API}/parties/{carol.name}/policy", headers=carol.auth)
    assert own.json() == {"auto_approve_from": [], "algorithms": None, "custom_code": False}
    other = client.get(f"{API}/parties/{carol.name}/policy", headers=alice.auth)
    assert other.status_code == 403

    updated = set_policy(client, carol, auto_approve_from=[alice.name], algorithms=["solo"])
    assert updated == {
        "auto_approve_from": [alice.name],
        "algorithms": ["solo"],
        "custom_code": False,
    }
    job = create_job(client, solo(alice, carol), headers=alice.auth)
    assert job["status"] == "queued"


def test_a_policy_names_only_what_exists(client: TestClient) -> None:
    carol = create_party(client, approves_admin=False)
    cases = [
        ({"auto_approve_from": ["nobody"]}, "unknown_party", ["body", "auto_approve_from", 0]),
        ({"algorithms": ["solo", "nope"]}, "unknown_algorithm", ["body", "algorithms", 1]),
    ]
    for change, code, loc in cases:
        body = {"auto_approve_from": [], "algorithms": None, "custom_code": False, **change}
        response = client.put(f"{API}/parties/{carol.name}/policy", json=body, headers=carol.auth)
        assert response.status_code == 422, response.text
        assert response.json()["code"] == code
        assert response.json()["errors"][0]["loc"] == loc


def test_admin_is_a_reserved_party_name(client: TestClient) -> None:
    for name in ("admin",):
        response = client.post(f"{API}/parties", json={"name": name}, headers=ADMIN)
        assert response.status_code == 422
        assert response.json()["code"] == "reserved_name"
        assert response.json()["errors"][0]["loc"] == ["body", "name"]


def test_an_algorithm_a_party_does_not_run_is_refused_naming_it(client: TestClient) -> None:
    alice, carol = create_party(client), create_party(client)
    set_policy(client, carol, auto_approve_from=["admin"], algorithms=["split"])
    response = client.post(
        f"{API}/jobs",
        json={"name": "j", "algorithm": "solo", "assignments": solo(alice, carol)},
        headers=ADMIN,
    )
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "algorithm_not_allowed"
    assert carol.name in response.json()["detail"]
    assert alice.name not in response.json()["detail"]


@pytest.fixture
def real_client(sqlite_url: str, tmp_path: Path) -> Iterator[TestClient]:
    """The control plane with the shipped algorithms (ddp has a custom model kind)."""
    settings = Settings(home=tmp_path, database_url=sqlite_url, admin_token=ADMIN_TOKEN)
    app = create_app(settings)
    with TestClient(app) as client:
        yield client
    app.state.engine.dispose()


def test_custom_code_is_refused_naming_each_party_whose_policy_forbids_it(
    real_client: TestClient,
) -> None:
    client = real_client
    alice, bob, carol = create_party(client), create_party(client), create_party(client)
    set_policy(client, alice, auto_approve_from=["admin"], custom_code=True)
    assignments = solo(alice, bob, carol)
    body = {"name": "x", "algorithm": "ddp", "config": CUSTOM, "assignments": assignments}

    response = client.post(f"{API}/jobs", json=body, headers=alice.auth)

    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "custom_code_not_allowed"
    assert f"parties {bob.name}, {carol.name} does not allow custom code" in problem["detail"]
    assert alice.name not in problem["detail"].split("policy of")[1]
    assert problem["errors"][0]["loc"] == ["body", "config", "model", "target"]
    listed = client.get(f"{API}/jobs", headers=ADMIN).json()
    assert listed["count"] == 0


def test_approving_custom_code_against_ones_own_policy_is_refused(
    real_client: TestClient,
) -> None:
    client = real_client
    alice, carol = create_party(client), create_party(client, approves_admin=False)
    set_policy(client, alice, auto_approve_from=["admin"], custom_code=True)
    set_policy(client, carol, custom_code=True)
    body = {"name": "x", "algorithm": "ddp", "config": CUSTOM, "assignments": solo(alice, carol)}
    job = client.post(f"{API}/jobs", json=body, headers=alice.auth).json()
    assert job["status"] == "pending"
    set_policy(client, carol, custom_code=False)

    response = decide(client, job["id"], carol, "approve")

    assert response.status_code == 409, response.text
    assert response.json()["code"] == "policy_forbids"
    assert get_job(client, job["id"])["waiting_for"] == [carol.name]
