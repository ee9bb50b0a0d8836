"""Ring collectives with uneven chunks on the shared world (see conftest: alice's ranks on gloo,
TLS to bob's): sums and bytes on the wire."""

from __future__ import annotations

from typing import Any

import torch

from tessera_ml.algorithms.hier_sync import ring
from tessera_ml.algorithms.hier_sync.slicing import even_bounds
from tessera_ml.comm.base import Communicator

RANKS = [0, 1, 2, 3]
BOUNDS = [0, 7, 7, 30, 41]  # member 1 owns an empty chunk
LENGTH = BOUNDS[-1]
REDUCED = 101
PAIRS = ([0, 2], [1, 3])


def contribution(rank: int) -> torch.Tensor:
    return torch.arange(LENGTH, dtype=torch.float32) * (rank + 1) + rank


def random_vector(rank: int) -> torch.Tensor:
    return torch.randn(REDUCED, generator=torch.Generator().manual_seed(rank))


def run_collectives(comm: Communicator) -> dict[str, Any]:
    """Runs on every rank of the shared world (see conftest)."""
    comm.stats.reset()
    buffer = contribution(comm.rank)
    ring.reduce_scatter(comm, RANKS, buffer, BOUNDS)
    own = buffer[BOUNDS[comm.rank] : BOUNDS[comm.rank + 1]].tolist()
    scatter_sent = comm.stats.sent

    gathered = torch.full((LENGTH,), -1.0)
    gathered[BOUNDS[comm.rank] : BOUNDS[comm.rank + 1]] = float(comm.rank)
    ring.all_gather(comm, RANKS, gathered, BOUNDS)
    gather_sent = comm.stats.sent - scatter_sent

    reduced = random_vector(comm.rank)
    before = comm.stats.sent
    ring.all_reduce(comm, RANKS, reduced, align=1)
    reduce_sent = comm.stats.sent - before

    # each of alice's ranks with the bob rank of the same number, as hier_sync's nodes pair up
    pair = PAIRS[comm.rank % 2]
    paired = random_vector(comm.rank)
    before_pair, messages = comm.stats.sent, comm.stats.messages_sent
    ring.all_reduce(comm, pair, paired)
    return {
        "own": own,
        "scatter_sent": scatter_sent,
        "gathered": gathered.tolist(),
        "gather_sent": gather_sent,
        "reduced": reduced.tolist(),
        "reduce_sent": reduce_sent,
        "paired": paired.tolist(),
        "pair_sent": comm.stats.sent - before_pair,
        "pair_messages": comm.stats.messages_sent - messages,
    }


def test_uneven_reduce_scatter_all_gather_and_all_reduce(world: dict[str, Any]) -> None:
    results = world["ring"]
    n = len(RANKS)
    total = torch.stack([contribution(r) for r in RANKS]).sum(0)
    expected_sum = torch.stack([random_vector(r) for r in RANKS]).sum(0)
    sizes = [BOUNDS[j + 1] - BOUNDS[j] for j in range(n)]
    cuts = even_bounds(REDUCED, n, 1)
    even = [cuts[j + 1] - cuts[j] for j in range(n)]
    expected_gather = [float(j) for j in range(n) for _ in range(sizes[j])]
    for rank, out in enumerate(results):
        after = (rank + 1) % n
        assert out["own"] == total[BOUNDS[rank] : BOUNDS[rank + 1]].tolist()
        # reduce-scatter: every chunk but its own; all-gather: every chunk but the next one's
        assert out["scatter_sent"] == (LENGTH - sizes[rank]) * 4
        assert out["gathered"] == expected_gather
        assert out["gather_sent"] == (LENGTH - sizes[after]) * 4
        assert torch.allclose(torch.tensor(out["reduced"]), expected_sum, atol=1e-6)
        assert out["reduced"] == results[0]["reduced"]
        assert out["reduce_sent"] == (2 * REDUCED - even[rank] - even[after]) * 4


def test_a_pair_swaps_once_and_both_hold_the_same_sum(world: dict[str, Any]) -> None:
    results = world["ring"]
    for pair in PAIRS:
        a, b = (random_vector(r) for r in pair)
        for rank in pair:
            out = results[rank]
            # the pair's sum is bit for bit the one sum both members compute, with the bytes
            # of a ring of two and one message instead of its two
            assert out["paired"] == (a + b).tolist()
            assert out["pair_sent"] == REDUCED * 4
            assert out["pair_messages"] == 1
