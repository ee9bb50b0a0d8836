"""Fixtures of the worker tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.worker.plane import Plane, running_plane


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[Plane]:
    """A control plane with its scheduler, parties alice and bob (see ``tests.worker.plane``)."""
    yield from running_plane(tmp_path)
