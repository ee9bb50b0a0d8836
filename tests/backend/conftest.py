"""Control-plane fixtures: an app per test over SQLite and over the real PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import Field
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from tessera_api.app import create_app
from tessera_api.db import make_engine
from tessera_api.models import Base
from tessera_api.settings import Settings
from tessera_ml.spec import OPERATIONAL_METRICS, AlgorithmConfig, AlgorithmSpec, RoleSpec

ADMIN_TOKEN = "test-admin-token-0123456789"


class SplitConfig(AlgorithmConfig):
    lr: float = Field(default=0.1, gt=0)
    steps: int = Field(default=10, ge=1)


SPECS = {
    "solo": AlgorithmSpec(
        name="solo",
        title="Solo",
        summary="one role, any number of parties",
        roles=(RoleSpec(name="trainer", min=1),),
        config_model=AlgorithmConfig,
        entry_point="tests.backend:never_run",
    ),
    "split": AlgorithmSpec(
        name="split",
        title="Split",
        summary="feature, middle and label parties",
        roles=(
            RoleSpec(name="feature", min=1, sees_metrics=OPERATIONAL_METRICS),
            RoleSpec(name="middle", min=0, max=1, sees_metrics=("*",)),
            RoleSpec(name="label", min=1, max=1),
        ),
        config_model=SplitConfig,
        entry_point="tests.backend:never_run",
    ),
}


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("db") / "tessera.db"
    return f"sqlite:///{path}"


@pytest.fixture(scope="session")
def fresh_postgres_url(postgres_url: str) -> Iterator[str]:
    """A database of our own on the shared server, dropped at the end of the session."""
    name = f"tessera_{uuid.uuid4().hex[:12]}"
    server = make_url(postgres_url).set(database="postgres")
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        if (engine := _schemas.pop(url, None)) is not None:
            engine.dispose()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


_schemas: dict[str, Engine] = {}


def _prepared(url: str) -> Engine:
    """An engine on ``url`` with the models' tables, emptied."""
    engine = _schemas.get(url)
    if engine is None:
        engine = make_engine(url)
        Base.metadata.create_all(engine)
        _schemas[url] = engine
    with engine.begin() as conn:
        for table in reversed(Base.metadata.sorted_tables):
            conn.execute(table.delete())
    return engine


@pytest.fixture(
    params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
)
def db_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "fresh_postgres_url"
    url: str = request.getfixturevalue(name)
    _prepared(url)
    return url


def _client(url: str, home: Path) -> Iterator[TestClient]:
    settings = Settings(home=home, database_url=url, admin_token=ADMIN_TOKEN)
    app = create_app(settings, specs=SPECS)
    with TestClient(app) as client:
        yield client
    app.state.engine.dispose()


@pytest.fixture
def client(db_url: str, tmp_path: Path) -> Iterator[TestClient]:
    """A client of an app over SQLite, then over PostgreSQL."""
    yield from _client(db_url, tmp_path)


@pytest.fixture
def sqlite_client(sqlite_url: str, tmp_path: Path) -> Iterator[TestClient]:
    """A client of an app over SQLite only (for the wide, slow sweeps)."""
    _prepared(sqlite_url)
    yield from _client(sqlite_url, tmp_path)
