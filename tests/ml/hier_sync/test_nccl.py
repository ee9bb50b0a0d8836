"""Inside a node on GPUs: NCCL's reduce-scatter / all-gather for equal pieces, rings otherwise."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tessera_ml.algorithms.hier_sync.node_ops import NodeOps
from tessera_ml.algorithms.hier_sync.topology import Topology
from tessera_ml.comm.base import Communicator
from tessera_ml.worlds import run_world

EQUAL = [0, 16, 32]
UNEVEN = [0, 16, 48]


def _node_ops(comm: Communicator) -> dict[str, Any]:
    device = getattr(comm, "device", torch.device("cpu"))
    ops = NodeOps(comm, Topology(((0, 1),)))
    out: dict[str, Any] = {"native": ops.group is not None}
    for name, bounds in (("equal", EQUAL), ("uneven", UNEVEN)):
        grad = torch.arange(bounds[-1], dtype=torch.float32, device=device) * (comm.rank + 1)
        ops.reduce_scatter(grad, bounds)
        own = slice(bounds[comm.rank], bounds[comm.rank + 1])
        out[f"{name}_reduced"] = grad[own].cpu().tolist()
        param = torch.full((bounds[-1],), -1.0, device=device)
        param[own] = float(comm.rank)
        ops.all_gather(param, [bounds])
        out[f"{name}_gathered"] = param.cpu().tolist()
    return out


@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2,
    reason="the NCCL path needs two CUDA GPUs",
)
def test_node_collectives_on_nccl() -> None:
    results = run_world(_node_ops, 2, backend="nccl")
    for rank, out in enumerate(results):
        assert out["native"] is True
        for name, bounds in (("equal", EQUAL), ("uneven", UNEVEN)):
            own = range(bounds[rank], bounds[rank + 1])
            assert out[f"{name}_reduced"] == [3.0 * i for i in own]
            sizes = [bounds[1] - bounds[0], bounds[2] - bounds[1]]
            assert out[f"{name}_gathered"] == [0.0] * sizes[0] + [1.0] * sizes[1]
