"""Schemathesis, with every check it has, against the API served by uvicorn: on SQLite and on
PostgreSQL, as the admin and as a party.

Each run gets a database of its own holding a running two-party job; the ids of that job, its
tasks, its workers and its party are offered beside the generated values, so requests reach past
the 404s into the handlers. The run is deterministic and kept small (the coverage phase, then a
few examples per operation); ``st run`` with the same options reproduces a failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient

from tessera_api.app import create_app
from tessera_api.db import scratch_postgres
from tessera_api.models import Base
from tessera_api.settings import Settings
from tessera_ml.worlds import free_port
from tests.backend.conftest import ADMIN_TOKEN, SPECS
from tests.backend.factories import RunningJob, running_job

EXAMPLES = 5
SEED = 20
RUN_TIMEOUT_S = 120

# Operations whose schema-valid requests may still be refused with 422 by rules the schema
# cannot state: a job names an algorithm, roles, parties and a configuration that must exist
# and fit one another; a policy names parties and algorithms that must exist; a retry names a
# checkpoint that must have been written; a task speaks only for the ranks it hosts; a
# certificate request must be a real one. positive_data_acceptance (schema-valid data must not
# get 422) cannot know these, so for these operations alone 422 is among its expected statuses;
# every other check stays as it is.
SEMANTIC_422 = (
    "jobs-create_job",
    "jobs-retry_job",
    "parties-put_policy",
    "telemetry-ingest_metrics",
    "telemetry-ingest_logs",
    "telemetry-record_checkpoint",
    "tasks-report_status",
    "tasks-issue_credentials",
    "workers-register_worker",
)
POSITIVE_EXPECTED = ["2xx", "3xx", "401", "403", "404", "409", "422", "429", "5xx"]


@dataclass
class Served:
    url: str
    world: RunningJob


def _config(world: RunningJob) -> str:
    """The schemathesis configuration: the world's ids beside generated values, and the one
    narrowed expectation above."""
    dictionaries = {
        "job": [world.id],
        "task": [world.alice_task, world.bob_task],
        "worker": [world.alice_worker, world.bob_worker],
        "name": [world.alice.name, world.bob.name, "solo"],
    }
    bindings = {
        "path.job_id": "job",
        "path.task_id": "task",
        "query.task_id": "task",
        "body.task_id": "task",
        "path.worker_id": "worker",
        "path.name": "name",
    }
    # a running job's event stream stays open: one event, or a second of it, shows its shape
    lines = ["max-stream-events = 1", ""]
    for name, values in dictionaries.items():
        lines += [f"[dictionaries.{name}]", f"values = {json.dumps(values)}", ""]
    lines.append("[parameters]")
    for key, name in bindings.items():
        lines.append(f'"{key}" = {{ dictionary = "{name}", probability = 0.5 }}')
    lines += [
        "",
        "[[operations]]",
        'include-operation-id = "events-stream_events"',
        "request-timeout = 1",
        "",
        "[[operations]]",
        f"include-operation-id = {json.dumps(list(SEMANTIC_422))}",
        f"checks.positive_data_acceptance.expected-statuses = {json.dumps(POSITIVE_EXPECTED)}",
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tessera.db'}"
        return
    postgres_url: str = request.getfixturevalue("postgres_url")
    with scratch_postgres(postgres_url, prefix="tessera_st") as url:
        yield url


@pytest.fixture
def served(database_url: str, tmp_path: Path) -> Iterator[Served]:
    settings = Settings(home=tmp_path, database_url=database_url, admin_token=ADMIN_TOKEN)
    app = create_app(settings, specs=SPECS)
    Base.metadata.create_all(app.state.engine)
    world = running_job(TestClient(app))
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield Served(f"http://127.0.0.1:{port}", world)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        app.state.engine.dispose()


def _schemathesis(served: Served, token: str, tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(_config(served.world))
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config),
        "run",
        f"{served.url}/api/v1/openapi.json",
        "--checks",
        "all",
        "--header",
        f"Authorization: Bearer {token}",
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        str(SEED),
        "--generation-deterministic",
        "--no-color",
    ]
    done = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, done.stdout[-20_000:] + done.stderr[-5_000:]


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_schemathesis_finds_nothing_as_the_admin(served: Served, tmp_path: Path) -> None:
    _schemathesis(served, ADMIN_TOKEN, tmp_path)


# as a party on PostgreSQL only, to keep the suite's time: the routes answer a party through the
# same queries on either database, and the admin's runs cover both
@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_schemathesis_finds_nothing_as_a_party(served: Served, tmp_path: Path) -> None:
    _schemathesis(served, served.world.alice.token, tmp_path)
