"""Alembic: head equals the models' schema on both backends, and it round-trips."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from tessera_api.db import make_engine
from tessera_api.migrate import downgrade, upgrade
from tessera_api.models import Base


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{request.getfixturevalue('tmp_path') / 'migrate.db'}"
        return
    base = make_url(request.getfixturevalue("postgres_url"))
    name = f"tessera_mig_{uuid.uuid4().hex[:10]}"
    server = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with server.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with server.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        server.dispose()


def schema_diff(url: str) -> list[object]:
    engine = make_engine(url)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    engine.dispose()
    return list(diff)


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    names = set(inspect(engine).get_table_names()) - {"alembic_version"}
    engine.dispose()
    return names


def test_head_is_the_models_schema_and_round_trips(empty_url: str) -> None:
    upgrade(empty_url)
    assert schema_diff(empty_url) == []
    assert tables(empty_url) == set(Base.metadata.tables)
    downgrade(empty_url)
    assert tables(empty_url) == set()
    upgrade(empty_url)
    assert schema_diff(empty_url) == []
