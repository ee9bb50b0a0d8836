"""The OpenAPI document declares the problem documents each route can answer."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

PROBLEM = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


def operations(client: TestClient) -> list[tuple[str, str, dict[str, Any]]]:
    document = client.get("/api/v1/openapi.json").json()
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def test_every_error_response_is_a_problem_document(sqlite_client: TestClient) -> None:
    document = sqlite_client.get("/api/v1/openapi.json").json()
    assert {"Problem", "FieldError"} <= set(document["components"]["schemas"])
    assert "HTTPValidationError" not in document["components"]["schemas"]
    for method, path, operation in operations(sqlite_client):
        for status, response in operation["responses"].items():
            if int(status) >= 400:
                assert response["content"] == PROBLEM, (method, path, status)


def test_routes_declare_what_their_dependencies_and_inputs_can_fail_with(
    sqlite_client: TestClient,
) -> None:
    for method, path, operation in operations(sqlite_client):
        declared = {int(s) for s in operation["responses"]}
        label = f"{method} {path}"
        if path == "/api/v1/health":
            assert declared == {200}
            continue
        assert {401, 403} <= declared, label
        if "requestBody" in operation:
            # a JSON body can be malformed (400); any body can be too large or invalid
            if "application/json" in operation["requestBody"]["content"]:
                assert 400 in declared, label
            assert {413, 422} <= declared, label
        if operation.get("parameters"):
            assert 422 in declared, label
        if "{" in path:
            assert 404 in declared, label
    declared = {
        f"{m} {p}": {int(s) for s in o["responses"]} for m, p, o in operations(sqlite_client)
    }
    assert declared["GET /api/v1/me"] == {200, 401, 403}
    assert 409 in declared["POST /api/v1/parties"]
    assert 409 in declared["DELETE /api/v1/jobs/{job_id}"]
    assert 422 not in declared["GET /api/v1/algorithms"]


def test_a_parameter_is_left_out_rather_than_null(sqlite_client: TestClient) -> None:
    for _, _, operation in operations(sqlite_client):
        for parameter in operation.get("parameters", []):
            assert {"type": "null"} not in parameter["schema"].get("anyOf", []), parameter


def test_a_method_a_path_lacks_is_answered_with_every_method_it_has(
    sqlite_client: TestClient,
) -> None:
    response = sqlite_client.request("OPTIONS", "/api/v1/workers")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"
    response = sqlite_client.put("/api/v1/jobs/x/metrics")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"
    assert response.headers["content-type"].startswith("application/problem+json")
