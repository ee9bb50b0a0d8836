"""Job creation, validation, idempotency, listing, cancel, retry and delete."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.backend.factories import (
    ADMIN,
    API,
    create_job,
    create_party,
    get_job,
    register_worker,
    report,
    running_job,
    start,
)


def post_job(client: TestClient, body: dict[str, Any], **headers: str) -> Any:
    return client.post(f"{API}/jobs", json=body, headers={**ADMIN, **headers})


def split_body(**parties: str) -> dict[str, Any]:
    return {
        "name": "split run",
        "algorithm": "split",
        "config": {"lr": 0.5},
        "assignments": [{"party": p, "role": r} for r, p in parties.items()],
    }


def test_create_stores_assignments_and_queues(client: TestClient) -> None:
    a, b, c = create_party(client), create_party(client), create_party(client)
    response = post_job(client, split_body(feature=a.name, middle=b.name, label=c.name))
    assert response.status_code == 201
    job = response.json()
    assert job["status"] == "queued"
    assert job["config"] == {"seed": 0, "lr": 0.5, "steps": 10}
    assert [(x["party"], x["role"]) for x in job["assignments"]] == [
        (a.name, "feature"),
        (b.name, "middle"),
        (c.name, "label"),
    ]
    assert job["attempts"][0]["status"] == "queued"
    assert get_job(client, job["id"])["id"] == job["id"]


def test_role_cardinality_is_a_422_with_the_field_path(client: TestClient) -> None:
    a, b = create_party(client), create_party(client)
    body = split_body(feature=a.name)
    response = post_job(client, body)
    assert response.status_code == 422
    problem = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    assert problem["code"] == "role_cardinality"
    assert "label" in problem["detail"]
    assert problem["errors"][0]["loc"] == ["body", "assignments"]
    body["assignments"].append({"party": b.name, "role": "chef"})
    response = post_job(client, body)
    assert response.json()["code"] == "unknown_role"
    assert response.json()["errors"][0]["loc"] == ["body", "assignments", 1, "role"]


@pytest.mark.parametrize(
    ("patch", "code", "loc"),
    [
        ({"config": {"lr": -1}}, "invalid_config", ["body", "config", "lr"]),
        ({"config": {"nope": 1}}, "invalid_config", ["body", "config", "nope"]),
        ({"algorithm": "missing"}, "unknown_algorithm", ["body", "algorithm"]),
    ],
)
def test_invalid_jobs_are_refused_with_their_field(
    client: TestClient, patch: dict[str, Any], code: str, loc: list[Any]
) -> None:
    a, c = create_party(client), create_party(client)
    response = post_job(client, {**split_body(feature=a.name, label=c.name), **patch})
    assert response.status_code == 422
    assert response.json()["code"] == code
    assert response.json()["errors"][0]["loc"] == loc


def test_unknown_and_disabled_parties_are_refused(client: TestClient) -> None:
    a = create_party(client)
    response = post_job(client, split_body(feature=a.name, label="ghost"))
    assert response.json()["code"] == "unknown_party"
    assert response.json()["errors"][0]["loc"] == ["body", "assignments", 1, "party"]
    c = create_party(client)
    client.post(f"{API}/parties/{c.name}/disable", headers=ADMIN)
    response = post_job(client, split_body(feature=a.name, label=c.name))
    assert response.status_code == 422
    assert response.json()["code"] == "party_disabled"


def test_idempotency_key_returns_the_same_job(client: TestClient) -> None:
    a, c = create_party(client), create_party(client)
    body = split_body(feature=a.name, label=c.name)
    first = post_job(client, body, **{"Idempotency-Key": "k-1"})
    again = post_job(client, body, **{"Idempotency-Key": "k-1"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    listed = client.get(f"{API}/jobs", headers=ADMIN).json()
    assert listed["count"] == 1
    other = post_job(client, {**body, "name": "else"}, **{"Idempotency-Key": "k-1"})
    assert other.status_code == 409
    assert other.json()["code"] == "idempotency_conflict"
    fresh = post_job(client, body, **{"Idempotency-Key": "k-2"})
    assert fresh.status_code == 201 and fresh.json()["id"] != first.json()["id"]


def test_party_may_create_only_jobs_it_plays_in(client: TestClient) -> None:
    a, b = create_party(client), create_party(client)
    mine = [{"party": a.name, "role": "trainer"}]
    assert (
        client.post(
            f"{API}/jobs",
            json={"name": "x", "algorithm": "solo", "assignments": mine},
            headers=a.auth,
        ).status_code
        == 201
    )
    response = client.post(
        f"{API}/jobs", json={"name": "x", "algorithm": "solo", "assignments": mine}, headers=b.auth
    )
    assert response.status_code == 403


def test_list_paginates_filters_and_sorts(client: TestClient) -> None:
    a, b = create_party(client), create_party(client)
    for i in range(5):
        create_job(client, [{"party": a.name, "role": "trainer"}], name=f"a{i}", priority=i)
    create_job(client, [{"party": b.name, "role": "trainer"}], name="b0")
    first = client.get(f"{API}/jobs?limit=2&sort=name", headers=ADMIN).json()
    assert first["count"] == 6
    assert [j["name"] for j in first["data"]] == ["a0", "a1"]
    second = client.get(f"{API}/jobs?limit=2&offset=2&sort=name", headers=ADMIN).json()
    assert [j["name"] for j in second["data"]] == ["a2", "a3"] and second["count"] == 6
    past_the_end = client.get(f"{API}/jobs?limit=2&offset=10", headers=ADMIN).json()
    assert past_the_end == {"data": [], "count": 6}
    by_priority = client.get(f"{API}/jobs?sort=-priority&party={a.name}", headers=ADMIN).json()
    assert [j["name"] for j in by_priority["data"]] == ["a4", "a3", "a2", "a1", "a0"]
    assert client.get(f"{API}/jobs?party={b.name}", headers=ADMIN).json()["count"] == 1
    assert client.get(f"{API}/jobs?algorithm=split", headers=ADMIN).json()["count"] == 0
    assert client.get(f"{API}/jobs?status=queued", headers=ADMIN).json()["count"] == 6
    assert client.get(f"{API}/jobs?status=running", headers=ADMIN).json()["count"] == 0
    seen_by_b = client.get(f"{API}/jobs", headers=b.auth).json()
    assert [j["name"] for j in seen_by_b["data"]] == ["b0"]
    assert client.get(f"{API}/jobs?sort=bogus", headers=ADMIN).status_code == 422


def action(client: TestClient, job_id: str, verb: str) -> Any:
    if verb == "delete":
        return client.delete(f"{API}/jobs/{job_id}", headers=ADMIN)
    return client.post(f"{API}/jobs/{job_id}/{verb}", headers=ADMIN)


def job_in(client: TestClient, status: str) -> str:
    """A job brought to ``status`` through the API and the scheduler's service calls."""
    if status == "queued":
        party = create_party(client)
        return str(create_job(client, [{"party": party.name, "role": "trainer"}])["id"])
    job = running_job(client)
    report(client, job.alice, job.alice_task, status="running")  # a cancel waits for it to stop
    if status == "cancelling":
        action(client, job.id, "cancel")
    elif status == "succeeded":
        report(client, job.alice, job.alice_task, status="succeeded")
        report(client, job.bob, job.bob_task, status="succeeded")
    elif status == "failed":
        report(client, job.alice, job.alice_task, status="failed", reason="x")
    elif status == "cancelled":
        action(client, job.id, "cancel")  # bob's task, never started, is cancelled at once
        report(client, job.alice, job.alice_task, status="cancelled")
    assert get_job(client, job.id)["status"] == status
    return job.id


# verb -> {status it is done from: status after}; any other status answers 409.
ACTIONS = {
    "cancel": {"queued": "cancelled", "running": "cancelling"},
    "retry": {"succeeded": "queued", "failed": "queued", "cancelled": "queued"},
    "delete": {"succeeded": None, "failed": None, "cancelled": None},
}
STATUSES = ["queued", "running", "cancelling", "succeeded", "failed", "cancelled"]


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("verb", list(ACTIONS))
def test_actions_in_every_status(client: TestClient, verb: str, status: str) -> None:
    job_id = job_in(client, status)
    response = action(client, job_id, verb)
    if status not in ACTIONS[verb]:
        assert response.status_code == 409
        assert response.json()["code"] in {"illegal_transition", "job_not_terminal"}
        assert status in response.json()["detail"]
        assert get_job(client, job_id)["status"] == status
        return
    assert response.status_code in (200, 204), response.text
    after = ACTIONS[verb][status]
    if after is None:
        assert client.get(f"{API}/jobs/{job_id}", headers=ADMIN).status_code == 404
    else:
        assert get_job(client, job_id)["status"] == after


def test_cancel_of_a_running_job_without_live_tasks_is_immediate(client: TestClient) -> None:
    job = running_job(client)
    report(client, job.alice, job.alice_task, status="succeeded")
    app: Any = client.app
    from tessera_api.models import Task

    with app.state.session_factory() as session:
        task = session.get(Task, job.bob_task)
        assert task is not None
        task.status = "succeeded"
        session.commit()
    assert action(client, job.id, "cancel").json()["status"] == "cancelled"


def test_pending_job_cancels_at_once(client: TestClient) -> None:
    from tessera_api.schemas import JobCreate
    from tessera_api.security import Caller
    from tessera_api.services.jobs import create_job as create_in_db
    from tests.backend.conftest import SPECS

    party = create_party(client)
    app: Any = client.app
    with app.state.session_factory() as session:
        job_in_db, _ = create_in_db(
            session,
            job_in=JobCreate.model_validate(
                {
                    "name": "p",
                    "algorithm": "solo",
                    "assignments": [{"party": party.name, "role": "trainer"}],
                }
            ),
            caller=Caller(party=None),
            specs=SPECS,
            idempotency_key=None,
        )
        session.commit()
        job_id = job_in_db.id
    assert get_job(client, job_id)["status"] == "pending"
    assert action(client, job_id, "retry").status_code == 409
    assert action(client, job_id, "cancel").json()["status"] == "cancelled"


def test_retry_opens_a_new_attempt(client: TestClient) -> None:
    job_id = job_in(client, "failed")
    job = action(client, job_id, "retry").json()
    assert [a["number"] for a in job["attempts"]] == [1, 2]
    assert [a["status"] for a in job["attempts"]] == ["failed", "queued"]
    assert job["attempts"][1]["resume_from"] is None
    worker = job["attempts"][0]["tasks"][0]["worker_id"]
    party = job["attempts"][0]["tasks"][0]["party"]
    other = job["attempts"][0]["tasks"][1]
    start(client, job_id, {party: (worker, [0]), other["party"]: (other["worker_id"], [1])})
    assert get_job(client, job_id)["attempts"][1]["status"] == "running"


def test_transitions_are_audited(client: TestClient) -> None:
    job_id = job_in(client, "failed")
    rows = client.get(f"{API}/jobs/{job_id}/transitions", headers=ADMIN).json()
    job_moves = [(r["from_status"], r["to_status"]) for r in rows if r["entity"] == "job"]
    assert job_moves == [
        (None, "pending"),
        ("pending", "queued"),
        ("queued", "running"),
        ("running", "failed"),
    ]


def test_start_attempt_checks_the_placement(client: TestClient) -> None:
    from tessera_api.errors import ApiError

    a = create_party(client)
    worker = register_worker(client, a)
    job = create_job(client, [{"party": a.name, "role": "trainer", "processes": 2}])
    with pytest.raises(ApiError, match=r"ranks \[1\] are not placed"):
        start(client, job["id"], {a.name: (worker, [0])})
    b = create_party(client)
    with pytest.raises(ApiError, match="not a worker of party"):
        start(client, job["id"], {b.name: (worker, [0, 1])})
    assert get_job(client, job["id"])["status"] == "queued"
    start(client, job["id"], {a.name: (worker, [0, 1])})
    assert get_job(client, job["id"])["status"] == "running"


def test_concurrent_creates_with_one_key_make_one_job(client: TestClient) -> None:
    from concurrent.futures import ThreadPoolExecutor

    party = create_party(client)
    body = {
        "name": "race",
        "algorithm": "solo",
        "assignments": [{"party": party.name, "role": "trainer"}],
    }
    with ThreadPoolExecutor(4) as pool:
        responses = list(
            pool.map(lambda _: post_job(client, body, **{"Idempotency-Key": "same"}), range(4))
        )
    codes = sorted(r.status_code for r in responses)
    assert codes == [200, 200, 200, 201], [r.text for r in responses]
    assert {r.json()["id"] for r in responses} == {responses[0].json()["id"]}
    assert client.get(f"{API}/jobs", headers=ADMIN).json()["count"] == 1


def test_a_job_asks_for_a_device_and_cuda_needs_a_role_that_can_use_one(
    client: TestClient,
) -> None:
    party = create_party(client)
    assignments = [{"party": party.name, "role": "trainer"}]
    assert create_job(client, assignments)["device"] == "auto"
    assert create_job(client, assignments, device="cpu")["device"] == "cpu"

    body = {"name": "j", "algorithm": "solo", "assignments": assignments, "device": "cuda"}
    response = client.post(f"{API}/jobs", json=body, headers=ADMIN)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "no_gpu_role"
    assert problem["errors"][0]["loc"] == ["body", "device"]

    response = client.post(f"{API}/jobs", json={**body, "device": "gpu"}, headers=ADMIN)
    assert response.status_code == 422
    assert ["body", "device"] in [e["loc"] for e in response.json()["errors"]]


def test_a_party_ranks_share_one_backend(client: TestClient) -> None:
    from tessera_api.errors import ApiError
    from tessera_api.services.lifecycle import Placement, RankDevice, start_attempt

    a = create_party(client)
    worker = register_worker(client, a)
    job = create_job(client, [{"party": a.name, "role": "trainer", "processes": 2}])
    app: Any = client.app
    mixed = [
        Placement(a.name, worker, [RankDevice(0, "cuda:0", "nccl"), RankDevice(1, "cpu", "gloo")])
    ]
    wrong = [
        Placement(a.name, worker, [RankDevice(0, "cuda:0", "gloo"), RankDevice(1, "cpu", "gloo")])
    ]
    with app.state.session_factory() as session:
        with pytest.raises(ApiError, match="would mix gloo and nccl"):
            start_attempt(session, job_id=job["id"], placements=mixed)
        with pytest.raises(ApiError, match="on cuda:0 cannot use gloo"):
            start_attempt(session, job_id=job["id"], placements=wrong)
    assert get_job(client, job["id"])["status"] == "queued"


@pytest.mark.parametrize("name", ["   ", "\u00a0 ", "\u3000"])
def test_a_job_name_of_only_spaces_is_refused_at_the_field(client: TestClient, name: str) -> None:
    party = create_party(client)
    body = {
        "name": name,
        "algorithm": "solo",
        "assignments": [{"party": party.name, "role": "trainer"}],
    }
    response = post_job(client, body)
    assert response.status_code == 422, response.text
    assert [e["loc"] for e in response.json()["errors"]] == [["body", "name"]]
    assert "spaces" in response.json()["errors"][0]["msg"]
    assert client.get(f"{API}/jobs", headers=ADMIN).json()["count"] == 0

    kept = post_job(client, {**body, "name": f" {name}x "})
    assert kept.status_code == 201, kept.text
    assert kept.json()["name"] == f" {name}x "
