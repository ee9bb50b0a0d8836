"""Property-based requests generated from the OpenAPI schema: no request may cause a 5xx.

Valid and invalid requests both; each case is sent as generated and again with its path pointing
at real rows, so the fuzz reaches past the 404s into the handlers.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tessera_api.app import create_app
from tessera_api.models import Base
from tessera_api.settings import Settings
from tests.backend.conftest import ADMIN_TOKEN, SPECS
from tests.backend.factories import ADMIN, running_job

REAL_IDS: dict[str, str] = {}
EXAMPLES = 8


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home: Path = tmp_path_factory.mktemp("fuzz")
    app = create_app(
        Settings(home=home, database_url=f"sqlite:///{home / 'db'}", admin_token=ADMIN_TOKEN),
        specs=SPECS,
    )
    Base.metadata.create_all(app.state.engine)
    world = running_job(TestClient(app))
    REAL_IDS.update(
        job_id=world.id, task_id=world.alice_task, worker_id=world.alice_worker, name="solo"
    )
    return schemathesis.openapi.from_asgi("/api/v1/openapi.json", app)


def check(case: Any) -> None:
    if case.path.endswith("/events"):
        case.query = {**(case.query or {}), "once": "true"}
    response = case.call(headers=ADMIN)
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text}"
    if case.path_parameters:
        case.path_parameters = {k: REAL_IDS.get(k, v) for k, v in case.path_parameters.items()}
        response = case.call(headers=ADMIN)
        assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.text}"
    if response.status_code >= 400:
        [content_type] = response.headers["content-type"]
        assert content_type.startswith("application/problem+json"), response.text


def test_no_request_causes_a_server_error(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 29
    for operation, mode in itertools.product(operations, GenerationMode):
        fuzz = settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )(given(case=operation.as_strategy(mode))(check))
        try:
            fuzz()
        except Unsatisfiable:
            # nothing of the operation can be made invalid (e.g. no parameters, no body)
            assert mode is GenerationMode.NEGATIVE, operation.label
