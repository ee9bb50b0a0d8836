"""One Tessera for the end-to-end tests: real PostgreSQL, real Redis, real worker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tessera_api.db import scratch_postgres
from tessera_ml.worlds import free_port
from tests.e2e.platform import Platform, start_platform


@pytest.fixture(scope="session")
def e2e_database(postgres_url: str) -> Iterator[str]:
    with scratch_postgres(postgres_url, prefix="tessera_e2e") as url:
        yield url


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
