"""Jobs against the algorithms the library really ships (skipped until they exist)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tessera_api.app import create_app
from tessera_api.models import Base
from tessera_api.settings import Settings
from tessera_ml.registry import all_specs
from tests.backend.conftest import ADMIN_TOKEN
from tests.backend.factories import ADMIN, API, create_party


@pytest.fixture
def shipped(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(Settings(home=tmp_path, admin_token=ADMIN_TOKEN))
    Base.metadata.create_all(app.state.engine)
    with TestClient(app) as client:
        yield client


def test_every_shipped_algorithm_is_served(shipped: TestClient) -> None:
    served = shipped.get(f"{API}/algorithms", headers=ADMIN).json()
    assert [a["name"] for a in served] == sorted(all_specs())
    for algorithm in served:
        assert algorithm["roles"] and all(
            {"name", "min", "max"} <= set(r) for r in algorithm["roles"]
        )


@pytest.mark.skipif("split_nn" not in all_specs(), reason="split_nn is not in the library yet")
def test_split_learning_roles_are_enforced(shipped: TestClient) -> None:
    alice, bob, carol = (create_party(shipped) for _ in range(3))

    def post(assignments: list[tuple[str, str]]) -> tuple[int, str]:
        body = {
            "name": "split",
            "algorithm": "split_nn",
            "assignments": [{"party": p, "role": r} for p, r in assignments],
        }
        response = shipped.post(f"{API}/jobs", json=body, headers=ADMIN)
        return response.status_code, str(response.json().get("code", ""))

    assert post([(alice.name, "feature"), (bob.name, "label")])[0] == 201
    assert post([(alice.name, "feature")]) == (422, "role_cardinality")
    two_labels = [(alice.name, "feature"), (bob.name, "label"), (carol.name, "label")]
    assert post(two_labels) == (422, "role_cardinality")
