"""Jobs taking turns (the benchmark harness's ``turns``), on a real gloo world of two jobs."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from tessera_ml.bench.harness import BenchHarness
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.pair_link import open_link
from tessera_ml.comm.peer import LocalPeer
from tessera_ml.harness import Harness
from tessera_ml.worlds import run_world

TURNS = 4
HOLD_S = 0.03


def _job_party(comm: Communicator, lock: str) -> dict[str, Any]:
    """Ranks 0 and 1 are one job's compute parties, ranks 2 and 3 another's; each party takes
    ``TURNS`` turns and, inside each, exchanges with its partner, waits, and exchanges again, as a
    step's rounds would."""
    index = comm.rank % 2
    peer, fell_back = open_link(comm, index, comm.rank ^ 1, "direct")
    assert fell_back is None
    harness = BenchHarness(turns=lock)
    harness.pin(index)
    spans: list[tuple[float, float]] = []
    met: list[list[tuple[float, float]]] = []  # per turn, when each meeting began and ended

    def meet() -> None:
        began = time.monotonic()  # party 1 gets here holding the lock
        peer.barrier()
        met[-1].append((began, time.monotonic()))

    try:
        for _ in range(TURNS):
            met.append([])
            with harness.turn(index, meet):
                start = time.monotonic()
                peer.barrier()
                time.sleep(HOLD_S)
                peer.barrier()
                spans.append((start, time.monotonic()))
    finally:
        peer.close()
    return {"spans": spans, "met": met, "cpus": sorted(os.sched_getaffinity(0))}


def test_two_jobs_never_hold_the_machine_at_once(tmp_path: Any) -> None:
    out = run_world(_job_party, 4, str(tmp_path / "turn.lock"))
    holders = [out[1]["spans"], out[3]["spans"]]  # party 1 of each job holds the lock
    for a_start, a_end in holders[0]:
        for b_start, b_end in holders[1]:
            assert a_end <= b_start or b_end <= a_start, "both jobs ran a turn at once"
    # party 0 starts a turn only once its own party 1 holds the lock, and before it lets go;
    # party 1 starts it only once party 0 is awake, back from a meeting of this turn
    for party0, party1 in ((out[0], out[1]), (out[2], out[3])):
        turns = zip(party0["spans"], party0["met"], party1["spans"], party1["met"], strict=True)
        for (start0, _), met0, (start1, end1), met1 in turns:
            locked1 = met1[0][0]
            assert locked1 <= start0 <= end1
            assert start1 >= min(ended for _, ended in met0)
    # each compute party keeps to one CPU, party i to the i-th of those it was given
    cpus = sorted(os.sched_getaffinity(0))
    for rank, result in enumerate(out):
        assert result["cpus"] == [cpus[(rank % 2) % len(cpus)]]


@pytest.mark.parametrize("harness", [Harness(), BenchHarness()], ids=["platform", "no turns"])
def test_without_turns_nothing_is_touched(harness: Harness) -> None:
    before = os.sched_getaffinity(0)
    unpaired = LocalPeer()  # no partner: any exchange would fail
    harness.pin(1)
    with harness.turn(1, unpaired.barrier), harness.work():
        pass
    assert unpaired.stats.rounds == 0
    assert os.sched_getaffinity(0) == before
    assert harness.link_bytes() is None  # not on a testbed host
