"""The OpenAPI document: clean operation ids and a one-line description on every route."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def test_operations_are_named_and_described(sqlite_client: TestClient) -> None:
    app: Any = sqlite_client.app
    schema = app.openapi()
    seen = set()
    for path, item in schema["paths"].items():
        assert path.startswith("/api/v1/")
        for operation in item.values():
            tag = operation["tags"][0]
            assert operation["operationId"].startswith(f"{tag}-")
            assert operation["operationId"] not in seen
            seen.add(operation["operationId"])
            description = operation.get("description", "")
            assert description and "\n" not in description.strip(), path
    assert sqlite_client.get("/api/v1/openapi.json").json()["info"]["title"]
