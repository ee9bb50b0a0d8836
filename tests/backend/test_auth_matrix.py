"""Who may call what: every route against admin, own party, other party and no token."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tessera_api.app import create_app
from tessera_api.models import Base
from tessera_api.settings import Settings
from tests.backend.conftest import ADMIN_TOKEN, SPECS
from tests.backend.factories import (
    ADMIN,
    API,
    PartyRef,
    RunningJob,
    create_party,
    running_job,
)

SHA = "0" * 64
OK, DENIED = True, False
HIDDEN = 404
"""Denied as if the job did not exist: a party without a role may not learn of it."""

# (method, path, body, admin, own party, other party); paths are formatted with the world.
ROUTES: list[
    tuple[str, str, Callable[[RunningJob], Any] | None, bool | int, bool | int, bool | int]
] = [
    ("GET", "/version", None, OK, OK, OK),
    ("GET", "/me", None, OK, OK, OK),
    ("GET", "/algorithms", None, OK, OK, OK),
    ("GET", "/algorithms/{name}", None, OK, OK, OK),
    ("POST", "/parties", lambda w: {"name": f"new-{w.id[:8]}"}, OK, DENIED, DENIED),
    ("GET", "/parties", None, OK, OK, OK),
    ("GET", "/party-directory", None, OK, OK, OK),
    ("GET", "/parties/{party}", None, OK, OK, DENIED),
    ("PATCH", "/parties/{party}", lambda w: {"description": "d"}, OK, DENIED, DENIED),
    ("POST", "/parties/{party}/disable", None, OK, DENIED, DENIED),
    ("GET", "/parties/{party}/policy", None, OK, OK, DENIED),
    (
        "PUT",
        "/parties/{party}/policy",
        lambda w: {"auto_approve_from": ["admin"], "algorithms": None, "custom_code": False},
        OK,
        OK,
        DENIED,
    ),
    (
        "POST",
        "/workers",
        lambda w: {"hostname": "h9", "cpu_count": 1, "memory_bytes": 1},
        DENIED,
        OK,
        OK,
    ),
    ("GET", "/workers", None, OK, OK, OK),
    ("POST", "/workers/{worker}/heartbeat", lambda w: {"running_tasks": []}, DENIED, OK, DENIED),
    (
        "POST",
        "/jobs",
        lambda w: {
            "name": "j",
            "algorithm": "solo",
            "assignments": [{"party": w.alice.name, "role": "trainer"}],
        },
        OK,
        OK,
        DENIED,
    ),
    ("GET", "/jobs", None, OK, OK, OK),
    ("GET", "/jobs/{job}", None, OK, OK, DENIED),
    ("DELETE", "/jobs/{job}", None, OK, OK, DENIED),
    ("POST", "/jobs/{job}/cancel", None, OK, OK, DENIED),
    ("POST", "/jobs/{job}/retry", None, OK, OK, DENIED),
    # the admin created the world's job: a party playing in it may not retag it
    ("PUT", "/jobs/{job}/tags", lambda w: {"tags": ["t"]}, OK, DENIED, DENIED),
    ("POST", "/jobs/{job}/approve", lambda w: {"reason": "fine"}, DENIED, OK, HIDDEN),
    ("POST", "/jobs/{job}/reject", lambda w: {"reason": "no"}, DENIED, OK, HIDDEN),
    ("GET", "/jobs/{job}/transitions", None, OK, OK, DENIED),
    ("GET", "/jobs/{job}/step-times", None, OK, OK, DENIED),
    # a job the caller does not see is left out of the answer rather than refused
    ("GET", "/job-digests?ids={job}", None, OK, OK, OK),
    ("GET", "/tasks/{task}", None, OK, OK, DENIED),
    (
        "POST",
        "/tasks/{task}/rendezvous",
        lambda w: {"host": "h", "port": 29500},
        DENIED,
        OK,
        DENIED,
    ),
    ("POST", "/tasks/{task}/status", lambda w: {"status": "running"}, DENIED, OK, DENIED),
    (
        "POST",
        "/tasks/{task}/credentials",
        lambda w: {"csr": "-----BEGIN CERTIFICATE REQUEST-----", "signature": "c2ln"},
        DENIED,
        OK,
        DENIED,
    ),
    (
        "POST",
        "/jobs/{job}/metrics",
        lambda w: {
            "task_id": w.alice_task,
            "points": [{"rank": 0, "name": "loss", "step": 1, "value": 1}],
        },
        OK,
        OK,
        DENIED,
    ),
    ("GET", "/jobs/{job}/metrics", None, OK, OK, DENIED),
    (
        "POST",
        "/jobs/{job}/logs",
        lambda w: {"task_id": w.alice_task, "lines": [{"rank": 0, "message": "hi"}]},
        OK,
        OK,
        DENIED,
    ),
    ("GET", "/jobs/{job}/logs", None, OK, OK, DENIED),
    (
        "POST",
        "/jobs/{job}/checkpoints",
        lambda w: {
            "task_id": w.alice_task,
            "rank": 0,
            "step": 5,
            "uri": "u",
            "size": 1,
            "sha256": SHA,
        },
        OK,
        OK,
        DENIED,
    ),
    ("GET", "/jobs/{job}/checkpoints", None, OK, OK, DENIED),
    # no checkpoint was recorded in these worlds: past the access checks, 404
    # (tests/backend/routes/test_checkpoint_files.py uploads and downloads real ones)
    (
        "PUT",
        "/jobs/{job}/checkpoints/{attempt}/{step}/{rank}/file?task_id={task}",
        None,
        404,
        404,
        DENIED,
    ),
    ("GET", "/jobs/{job}/checkpoints/{attempt}/{step}/{rank}/file", None, 404, 404, DENIED),
    ("GET", "/jobs/{job}/events?once=true", None, OK, OK, DENIED),
]


@pytest.fixture(scope="module")
def matrix_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One app for the whole matrix; each cell builds its own world in it."""
    home = tmp_path_factory.mktemp("matrix")
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'db'}", admin_token=ADMIN_TOKEN)
    app = create_app(settings, specs=SPECS)
    Base.metadata.create_all(app.state.engine)
    with TestClient(app) as client:
        yield client
    app.state.engine.dispose()


def call(client: TestClient, route: tuple[Any, ...], world: RunningJob, headers: Any) -> Any:
    method, path, body = route[:3]
    url = API + path.format(
        name="solo",
        party=world.alice.name,
        worker=world.alice_worker,
        job=world.id,
        task=world.alice_task,
        attempt=1,
        step=5,
        rank=0,
    )
    return client.request(method, url, json=body(world) if body else None, headers=headers)


_shared: dict[str, tuple[RunningJob, PartyRef]] = {}


def world_for(client: TestClient, method: str) -> tuple[RunningJob, PartyRef]:
    """Reads share one world; every call that may change something gets a fresh one."""
    if method == "GET" and "world" in _shared:
        return _shared["world"]
    world = (running_job(client), create_party(client))
    if method == "GET":
        _shared["world"] = world
    return world


@pytest.mark.parametrize("who", ["admin", "own", "other", "none"])
@pytest.mark.parametrize("route", ROUTES, ids=[f"{r[0]} {r[1]}" for r in ROUTES])
def test_route_access(matrix_client: TestClient, route: tuple[Any, ...], who: str) -> None:
    world, stranger = world_for(matrix_client, route[0])
    headers = {"admin": ADMIN, "own": world.alice.auth, "other": stranger.auth, "none": {}}[who]
    allowed = {"admin": route[3], "own": route[4], "other": route[5], "none": False}[who]
    response = call(matrix_client, route, world, headers)
    if allowed is True:
        assert response.status_code < 400 or response.status_code == 409, response.text
    else:
        expected = 401 if who == "none" else (403 if allowed is False else allowed)
        assert response.status_code == expected, response.text
        assert response.headers["content-type"].startswith("application/problem+json")


def test_every_route_is_in_the_matrix(sqlite_client: TestClient) -> None:
    app: Any = sqlite_client.app
    names = {
        "{party}": "{name}",
        "{worker}": "{worker_id}",
        "{job}": "{job_id}",
        "{task}": "{task_id}",
    }
    listed = {("GET", f"{API}/health")}
    for method, path, *_ in ROUTES:
        for short, full in names.items():
            path = path.replace(short, full)
        listed.add((method, API + path.split("?")[0]))
    served = {
        (method.upper(), path) for path, item in app.openapi()["paths"].items() for method in item
    }
    assert served == listed


def test_health_needs_no_token(sqlite_client: TestClient) -> None:
    assert sqlite_client.get(f"{API}/health").json() == {"status": "ok"}


def test_malformed_bearer_is_refused(sqlite_client: TestClient) -> None:
    for header in ({"Authorization": "Basic abc"}, {"Authorization": "Bearer nope"}):
        response = sqlite_client.get(f"{API}/jobs", headers=header)
        assert response.status_code == 401
        assert response.json()["code"] in {"unauthenticated", "invalid_token"}
