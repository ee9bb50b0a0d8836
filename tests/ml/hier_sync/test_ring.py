"""Ring collectives with uneven chunks on a real gloo world: sums and bytes on the wire."""

from __future__ import annotations

import torch

from tessera_ml.algorithms.hier_sync import ring
from tessera_ml.comm.base import Communicator
from tessera_ml.testing import run_world

BOUNDS = [0, 7, 7, 30]  # member 1 owns an empty chunk


def _contribution(rank: int) -> torch.Tensor:
    return torch.arange(30, dtype=torch.float32) * (rank + 1) + rank


def _collectives(comm: Communicator) -> dict[str, object]:
    ranks = [0, 1, 2]
    buffer = _contribution(comm.rank)
    ring.reduce_scatter(comm, ranks, buffer, BOUNDS)
    own = buffer[BOUNDS[comm.rank] : BOUNDS[comm.rank + 1]].clone()
    scatter_sent = comm.stats.sent

    gathered = torch.full((30,), -1.0)
    mine = slice(BOUNDS[comm.rank], BOUNDS[comm.rank + 1])
    gathered[mine] = float(comm.rank)
    ring.all_gather(comm, ranks, gathered, BOUNDS)
    gather_sent = comm.stats.sent - scatter_sent

    reduced = torch.randn(101, generator=torch.Generator().manual_seed(comm.rank))
    before = comm.stats.sent
    ring.all_reduce(comm, ranks, reduced, align=1)
    return {
        "own": own.tolist(),
        "scatter_sent": scatter_sent,
        "gathered": gathered.tolist(),
        "gather_sent": gather_sent,
        "reduced": reduced.tolist(),
        "reduce_sent": comm.stats.sent - before,
    }


def test_uneven_reduce_scatter_all_gather_and_all_reduce() -> None:
    results = run_world(_collectives, 3)
    total = sum(_contribution(r) for r in range(3))
    expected_reduced = sum(
        torch.randn(101, generator=torch.Generator().manual_seed(r)) for r in range(3)
    )
    sizes = [BOUNDS[j + 1] - BOUNDS[j] for j in range(3)]
    reduce_sizes = [34, 33, 34]  # even_bounds(101, 3, 1)
    for rank, out in enumerate(results):
        chunk = slice(BOUNDS[rank], BOUNDS[rank + 1])
        after = (rank + 1) % 3
        assert out["own"] == total[chunk].tolist()
        # reduce-scatter: every chunk but its own; all-gather: every chunk but the next one's
        assert out["scatter_sent"] == (30 - sizes[rank]) * 4
        assert out["gathered"] == [0.0] * 7 + [2.0] * 23
        assert out["gather_sent"] == (30 - sizes[after]) * 4
        assert torch.allclose(torch.tensor(out["reduced"]), expected_reduced, atol=1e-6)
        assert out["reduced"] == results[0]["reduced"]
        assert out["reduce_sent"] == (2 * 101 - reduce_sizes[rank] - reduce_sizes[after]) * 4
