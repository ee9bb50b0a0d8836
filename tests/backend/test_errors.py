"""Every error, the framework's own included, is an RFC 9457 problem document."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tessera_api.app import create_app
from tessera_api.limits import MAX_BODY_BYTES
from tessera_api.settings import Settings
from tests.backend.conftest import ADMIN_TOKEN, SPECS
from tests.backend.factories import ADMIN, API


def assert_problem(response: object, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status
    headers = response.headers
    assert headers["content-type"].startswith("application/problem+json")
    body: dict[str, object] = response.json()
    assert body["status"] == status and body["code"] == code
    assert body["type"] == f"urn:tessera:problem:{code}"
    assert isinstance(body["title"], str) and isinstance(body["detail"], str)
    return body


def test_framework_errors_are_problems(sqlite_client: TestClient) -> None:
    assert_problem(sqlite_client.get(f"{API}/nowhere", headers=ADMIN), 404, "not_found")
    assert_problem(sqlite_client.put(f"{API}/jobs", headers=ADMIN), 405, "method_not_allowed")
    missing = assert_problem(sqlite_client.get(f"{API}/jobs/abc", headers=ADMIN), 404, "not_found")
    assert "abc" in str(missing["detail"])


def test_malformed_bodies_name_their_fields(sqlite_client: TestClient) -> None:
    broken = sqlite_client.post(
        f"{API}/parties",
        content=b"{not json",
        headers={**ADMIN, "Content-Type": "application/json"},
    )
    assert_problem(broken, 422, "validation_error")
    wrong = sqlite_client.post(
        f"{API}/jobs", json={"name": "", "algorithm": 5, "assignments": []}, headers=ADMIN
    )
    body = assert_problem(wrong, 422, "validation_error")
    locs = [tuple(e["loc"]) for e in body["errors"]]  # type: ignore[attr-defined]
    assert ("body", "name") in locs and ("body", "assignments") in locs
    bad_query = sqlite_client.get(f"{API}/jobs?limit=0", headers=ADMIN)
    assert ["query", "limit"] in [e["loc"] for e in bad_query.json()["errors"]]


def test_auth_errors_are_problems(sqlite_client: TestClient) -> None:
    response = sqlite_client.get(f"{API}/jobs")
    assert_problem(response, 401, "unauthenticated")
    assert response.headers["www-authenticate"] == "Bearer"


def test_unexpected_failures_are_problems_too(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, admin_token=ADMIN_TOKEN)
    app = create_app(settings, specs=SPECS)

    @app.get("/api/v1/boom")
    def boom() -> None:
        raise RuntimeError("secret internals")

    client = TestClient(app, raise_server_exceptions=False)
    body = assert_problem(client.get("/api/v1/boom"), 500, "internal_error")
    assert "secret" not in str(body)


def test_a_body_over_the_limit_is_refused_before_it_is_read(sqlite_client: TestClient) -> None:
    body = b'{"task_id": "t", "lines": []}'.ljust(MAX_BODY_BYTES + 1)
    headers = {**ADMIN, "Content-Type": "application/json"}
    response = sqlite_client.post(f"{API}/jobs/x/logs", content=body, headers=headers)
    assert_problem(response, 413, "payload_too_large")
    chunks = (b" " * 2**20 for _ in range(MAX_BODY_BYTES // 2**20 + 1))  # no Content-Length
    streamed = sqlite_client.post(f"{API}/jobs/x/logs", content=chunks, headers=headers)
    assert_problem(streamed, 413, "payload_too_large")
    small = sqlite_client.post(f"{API}/jobs/x/logs", content=body.strip(), headers=headers)
    assert_problem(small, 404, "not_found")
