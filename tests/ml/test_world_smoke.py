"""A real gloo world of local processes: collectives and p2p with byte accounting."""

from __future__ import annotations

import torch

from tessera_ml.comm.base import Communicator
from tessera_ml.testing import run_world


def _ring(comm: Communicator) -> tuple[list[float], int, int]:
    t = torch.full((4,), float(comm.rank + 1))
    comm.all_reduce(t)
    nxt, prv = (comm.rank + 1) % comm.world_size, (comm.rank - 1) % comm.world_size
    buf = torch.empty(8)
    send = comm.isend(torch.full((8,), float(comm.rank)), nxt)
    comm.recv(buf, prv)
    send.wait()
    assert buf[0].item() == prv
    return t.tolist(), comm.stats.sent_to[nxt], comm.stats.recv_from[prv]


def test_world_runs_collectives_and_counts_p2p_bytes() -> None:
    results = run_world(_ring, 3)
    for reduced, sent, received in results:
        assert reduced == [6.0] * 4
        assert sent == 8 * 4
        assert received == 8 * 4
