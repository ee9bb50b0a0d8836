"""Who am I, and finding jobs by name."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.backend.factories import ADMIN, API, create_job, create_party


def test_me_names_the_admin_or_the_party(client: TestClient) -> None:
    alice = create_party(client)
    assert client.get(f"{API}/me", headers=ADMIN).json() == {"name": "admin", "is_admin": True}
    assert client.get(f"{API}/me", headers=alice.auth).json() == {
        "name": alice.name,
        "is_admin": False,
    }
    assert client.get(f"{API}/me").status_code == 401


def test_jobs_are_found_by_part_of_their_name(client: TestClient) -> None:
    a = create_party(client)
    for name in ("mnist-ddp", "MNIST_split", "wine 100%", "clicks"):
        create_job(client, [{"party": a.name, "role": "trainer"}], name=name)

    def found(q: str) -> list[str]:
        body = client.get(f"{API}/jobs", params={"q": q}, headers=ADMIN).json()
        return sorted(j["name"] for j in body["data"])

    assert found("mnist") == ["MNIST_split", "mnist-ddp"]
    assert found("%") == ["wine 100%"]
    assert found("_") == ["MNIST_split"]
    assert found("nothing") == []
