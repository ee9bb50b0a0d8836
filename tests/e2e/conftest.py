"""One Tessera for the end-to-end tests: real PostgreSQL, real Redis, real worker processes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tessera_ml.testing import free_port
from tests.e2e.platform import Platform, start_platform


@pytest.fixture(scope="session")
def e2e_database(postgres_url: str) -> Iterator[str]:
    name = f"tessera_e2e_{uuid.uuid4().hex[:12]}"
    admin = postgres_url.replace("+psycopg", "")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = postgres_url.rpartition("/")
    yield f"{base}/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def platform(
    e2e_database: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Platform]:
    home: Path = tmp_path_factory.mktemp("tessera-home")
    running = start_platform(
        home,
        free_port(),
        database_url=e2e_database,
        broker_url=redis_url,
        parties="alice,bob,carol",
        workers="alice,bob",
    )
    try:
        yield running
    finally:
        running.stop()
