from __future__ import annotations

from typing import Any

import pytest

from tessera_ml.worlds import run_world
from tests.ml.worlds import world_parties
from tests.ml.zo_pair.world import PLANS, zo_world


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every rank's results from the one four-processor world (see ``world.py``), wired as
    the platform wires its jobs: alice's three ranks on gloo, TLS to bob's."""
    folder = str(tmp_path_factory.mktemp("zo_pair_jobs"))
    return run_world(zo_world, 4, folder, parties=world_parties(PLANS))
