"""Fixtures shared by every part of the suite: the real services CI provides."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

import pytest

REQUIRE_SERVICES = os.environ.get("TESSERA_REQUIRE_SERVICES") == "1"


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url.replace("+psycopg", ""))
    try:
        address = (parsed.hostname or "127.0.0.1", parsed.port or default_port)
        with socket.create_connection(address, 2):
            return True
    except OSError:
        return False


def _service(url: str, port: int, what: str) -> str:
    if _reachable(url, port):
        return url
    if REQUIRE_SERVICES:
        pytest.fail(f"{what} at {url} is required (TESSERA_REQUIRE_SERVICES=1) but unreachable")
    pytest.skip(f"{what} at {url} is not reachable")


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The real PostgreSQL (CI sets TESSERA_TEST_DATABASE_URL)."""
    url = os.environ.get(
        "TESSERA_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    )
    return _service(url, 5432, "PostgreSQL")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The real Redis (CI sets TESSERA_TEST_REDIS_URL)."""
    url = os.environ.get("TESSERA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    return _service(url, 6379, "Redis")
