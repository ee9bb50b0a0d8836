"""A job's tags: given at creation, checked, kept once each, changed later by those allowed, and
the jobs list filtered by one."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tessera_api.models import JobTag
from tests.backend.factories import ADMIN, API, PartyRef, create_job, create_party, get_job


def solo(party: PartyRef, **extra: Any) -> dict[str, Any]:
    return {
        "name": "tagged",
        "algorithm": "solo",
        "assignments": [{"party": party.name, "role": "trainer"}],
        **extra,
    }


def put_tags(client: TestClient, job_id: str, tags: Any, headers: dict[str, str]) -> Any:
    return client.put(f"{API}/jobs/{job_id}/tags", json={"tags": tags}, headers=headers)


def listed(client: TestClient, **query: str) -> list[str]:
    response = client.get(f"{API}/jobs", params={**query, "sort": "name"}, headers=ADMIN)
    assert response.status_code == 200, response.text
    return [j["name"] for j in response.json()["data"]]


def stored_tags(client: TestClient, job_id: str) -> list[str]:
    app: Any = client.app
    with app.state.session_factory() as session:
        rows = session.query(JobTag.tag).filter(JobTag.job_id == job_id).order_by(JobTag.tag)
        return [tag for (tag,) in rows]


def test_tags_are_kept_in_order_once_each_and_shown_in_the_list(client: TestClient) -> None:
    party = create_party(client)
    tags = ["baseline", "sweep:lr/0.1", "v2 run", "baseline", "A-b_c.d", "sweep:lr/0.1"]
    job = create_job(client, solo(party)["assignments"], tags=tags)
    assert job["tags"] == ["baseline", "sweep:lr/0.1", "v2 run", "A-b_c.d"]
    assert get_job(client, job["id"])["tags"] == job["tags"]
    summary = client.get(f"{API}/jobs", headers=ADMIN).json()["data"][0]
    assert summary["tags"] == job["tags"]
    assert stored_tags(client, job["id"]) == sorted(job["tags"])

    untagged = create_job(client, solo(party)["assignments"])
    assert untagged["tags"] == []


@pytest.mark.parametrize(
    ("tags", "loc", "says"),
    [
        ([f"t{i}" for i in range(17)], ["body", "tags"], "at most 16"),
        (["ok", "x" * 33], ["body", "tags", 1], "at most 32"),
        (["ok", ""], ["body", "tags", 1], "at least 1"),
        (["-lead"], ["body", "tags", 0], "starts with a letter or a digit"),
        (["ok", "semi;colon"], ["body", "tags", 1], "starts with a letter or a digit"),
        (["caf\u00e9"], ["body", "tags", 0], "starts with a letter or a digit"),
        (["tab\there"], ["body", "tags", 0], "control characters (U+0009, at position 3)"),
        (["nul\x00"], ["body", "tags", 0], "control characters (U+0000"),
        (["line\n"], ["body", "tags", 0], "control characters (U+000A"),
        ([3], ["body", "tags", 0], "string"),
        ("a,b", ["body", "tags"], "list"),
    ],
)
def test_bad_tags_are_refused_at_their_field(
    sqlite_client: TestClient, tags: Any, loc: list[Any], says: str
) -> None:
    # refused by validation before any database sees them: one database is enough
    client = sqlite_client
    party = create_party(client)
    response = client.post(f"{API}/jobs", json=solo(party, tags=tags), headers=ADMIN)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    errors = response.json()["errors"]
    assert [e["loc"] for e in errors] == [loc]
    assert says in errors[0]["msg"]
    assert client.get(f"{API}/jobs", headers=ADMIN).json()["count"] == 0

    job = create_job(client, solo(party)["assignments"])
    response = put_tags(client, job["id"], tags, ADMIN)
    assert response.status_code == 422, response.text
    assert [e["loc"] for e in response.json()["errors"]] == [loc]
    assert get_job(client, job["id"])["tags"] == []


def test_sixteen_tags_of_32_characters_are_accepted(client: TestClient) -> None:
    party = create_party(client)
    tags = [f"{i:02d}" + "x" * 30 for i in range(16)]
    job = create_job(client, solo(party)["assignments"], tags=tags)
    assert job["tags"] == tags


def test_the_creator_and_the_admin_change_tags_others_may_not(client: TestClient) -> None:
    alice, bob, stranger = create_party(client), create_party(client), create_party(client)
    body = solo(alice)
    body["assignments"].append({"party": bob.name, "role": "trainer"})
    created = client.post(f"{API}/jobs", json={**body, "tags": ["a"]}, headers=alice.auth)
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]

    mine = put_tags(client, job_id, ["b", "a", "b"], alice.auth)
    assert mine.status_code == 200, mine.text
    assert mine.json()["tags"] == ["b", "a"]
    assert stored_tags(client, job_id) == ["a", "b"]

    # bob plays a role but did not create the job; the stranger does not even see it
    for other in (bob, stranger):
        refused = put_tags(client, job_id, ["mine"], other.auth)
        assert refused.status_code == 403, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
    assert get_job(client, job_id)["tags"] == ["b", "a"]

    by_admin = put_tags(client, job_id, ["c"], ADMIN)
    assert by_admin.status_code == 200 and by_admin.json()["tags"] == ["c"]
    assert stored_tags(client, job_id) == ["c"]
    assert listed(client, tag="a") == [] and listed(client, tag="c") == ["tagged"]

    cleared = put_tags(client, job_id, [], alice.auth)
    assert cleared.json()["tags"] == [] and stored_tags(client, job_id) == []

    missing = put_tags(client, "0" * 32, ["a"], ADMIN)
    assert missing.status_code == 404
    assert missing.json()["code"] == "not_found"


def test_an_admin_job_is_tagged_by_the_admin_alone(client: TestClient) -> None:
    party = create_party(client)
    job = create_job(client, solo(party)["assignments"], tags=["x"])
    assert put_tags(client, job["id"], ["y"], party.auth).status_code == 403
    assert put_tags(client, job["id"], ["y"], ADMIN).json()["tags"] == ["y"]


def test_the_list_filters_by_a_whole_tag(client: TestClient) -> None:
    alice, bob = create_party(client), create_party(client)
    for name, tags in {
        "j-a": ["a"],
        "j-ab": ["ab"],
        "j-both": ["ab", "a"],
        "j-space": ["a b"],
        "j-upper": ["A"],
        "j-none": [],
    }.items():
        create_job(client, solo(alice)["assignments"], name=name, tags=tags)
    create_job(client, solo(bob)["assignments"], name="j-bob", tags=["a"])

    assert listed(client, tag="a") == ["j-a", "j-bob", "j-both"]
    assert listed(client, tag="ab") == ["j-ab", "j-both"]
    assert listed(client, tag="a b") == ["j-space"]
    assert listed(client, tag="A") == ["j-upper"]
    assert listed(client, tag="b") == []
    assert listed(client, tag="a", party=bob.name) == ["j-bob"]
    page = client.get(f"{API}/jobs", params={"tag": "a", "limit": 1}, headers=ADMIN).json()
    assert page["count"] == 3 and len(page["data"]) == 1
    # a party sees only the tagged jobs it plays in
    seen = client.get(f"{API}/jobs", params={"tag": "a"}, headers=bob.auth).json()
    assert [j["name"] for j in seen["data"]] == ["j-bob"]

    for bad in ("", "x" * 33, "a%b", "-a", "a\tb"):
        response = client.get(f"{API}/jobs", params={"tag": bad}, headers=ADMIN)
        assert response.status_code == 422, bad
        assert response.json()["errors"][0]["loc"] == ["query", "tag"]


def test_deleting_a_job_deletes_its_tags(client: TestClient) -> None:
    party = create_party(client)
    job = create_job(client, solo(party)["assignments"], tags=["gone"])
    assert client.post(f"{API}/jobs/{job['id']}/cancel", headers=ADMIN).status_code == 200
    assert client.delete(f"{API}/jobs/{job['id']}", headers=ADMIN).status_code == 204
    assert stored_tags(client, job["id"]) == []
    assert listed(client, tag="gone") == []


def test_tags_count_in_the_idempotency_key_and_survive_a_retry(client: TestClient) -> None:
    party = create_party(client)
    body = solo(party, tags=["t"])
    first = client.post(f"{API}/jobs", json=body, headers={**ADMIN, "Idempotency-Key": "k"})
    again = client.post(f"{API}/jobs", json=body, headers={**ADMIN, "Idempotency-Key": "k"})
    assert (first.status_code, again.status_code) == (201, 200)
    other = client.post(
        f"{API}/jobs", json={**body, "tags": ["u"]}, headers={**ADMIN, "Idempotency-Key": "k"}
    )
    assert other.status_code == 409
    job_id = first.json()["id"]
    assert client.post(f"{API}/jobs/{job_id}/cancel", headers=ADMIN).status_code == 200
    retried = client.post(f"{API}/jobs/{job_id}/retry", headers=ADMIN)
    assert retried.status_code == 200, retried.text
    assert retried.json()["tags"] == ["t"] and len(retried.json()["attempts"]) == 2
