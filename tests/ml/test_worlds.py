"""Worlds of local processes: what a rank starts with."""

from __future__ import annotations

import os
import sys

import pytest

from tessera_ml.comm.base import Communicator
from tessera_ml.worlds import WorldError, run_world


def _environment(comm: Communicator) -> tuple[dict[str, str], bool]:
    return dict(os.environ), "torch" in sys.modules


def _fail_on_rank_1(comm: Communicator) -> int:
    if comm.rank == 1:
        raise ValueError("rank 1 gives up")
    return comm.rank


def test_each_rank_has_the_callers_environment_as_it_is_at_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a world first with a variable that goes afterwards: where ranks are forked from a server,
    # the server may have started with it
    monkeypatch.setenv("TESSERA_WORLD_GONE", "set for the first world")
    run_world(_environment, 2)
    monkeypatch.delenv("TESSERA_WORLD_GONE")
    monkeypatch.setenv("TESSERA_WORLD_PROBE", "set after the first world")
    monkeypatch.setenv("TESSERA_WORLD_OVERRIDDEN", "caller's")
    results = run_world(_environment, 2, env={"TESSERA_WORLD_OVERRIDDEN": "the world's"})
    expected = {**os.environ, "TESSERA_WORLD_OVERRIDDEN": "the world's"}
    for seen, has_torch in results:
        assert seen == expected
        assert has_torch


def test_a_rank_that_raises_fails_the_world_with_its_traceback() -> None:
    with pytest.raises(WorldError, match=r"(?s)rank 1 failed.*ValueError: rank 1 gives up"):
        run_world(_fail_on_rank_1, 2)
