"""Reduce-scatter and all-gather inside a node: NCCL's own where sizes allow, else the rings.

NCCL's collectives take equal chunks only; a bucket whose pieces are all equal (equal slicing
on an aligned bucket) uses them, any other bucket the p2p rings of ``ring.py``. Under gloo the
rings always run (gloo's reduce-scatter moves twice the bytes). Bytes of NCCL collectives are
accounted to the group ``intra_node.<node>`` with the ring formulas.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from tessera_ml.algorithms.hier_sync import ring
from tessera_ml.algorithms.hier_sync.topology import Topology
from tessera_ml.comm.base import Communicator, Group


class NodeOps:
    def __init__(self, comm: Communicator, topology: Topology) -> None:
        self.comm = comm
        self.ranks = topology.node_ranks(comm.rank)
        self.position = self.ranks.index(comm.rank)
        self.group: Group | None = None
        if getattr(comm, "backend", "gloo") == "nccl" and len(self.ranks) > 1:
            for node, ranks in enumerate(topology.nodes):  # collective: every rank, every group
                group = comm.new_group(ranks, f"intra_node.{node}")
                if comm.rank in ranks:
                    self.group = group

    def _native(self, bounds: Sequence[int]) -> bool:
        sizes = {bounds[j + 1] - bounds[j] for j in range(len(bounds) - 1)}
        return self.group is not None and len(sizes) == 1 and 0 not in sizes

    def reduce_scatter(self, buffer: torch.Tensor, bounds: Sequence[int]) -> None:
        if not self._native(bounds):
            ring.reduce_scatter(self.comm, self.ranks, buffer, bounds)
            return
        assert self.group is not None
        start, end = bounds[self.position], bounds[self.position + 1]
        out = torch.empty(end - start, dtype=buffer.dtype, device=buffer.device)
        dist.reduce_scatter_tensor(out, buffer[bounds[0] : bounds[-1]], group=self.group.handle)
        buffer[start:end].copy_(out)
        self._account(bounds, buffer.element_size())

    def all_gather(self, buffer: torch.Tensor, bounds: Sequence[int]) -> None:
        if not self._native(bounds):
            ring.all_gather(self.comm, self.ranks, buffer, bounds)
            return
        assert self.group is not None
        own = buffer[bounds[self.position] : bounds[self.position + 1]].clone()
        dist.all_gather_into_tensor(buffer[bounds[0] : bounds[-1]], own, group=self.group.handle)
        self._account(bounds, buffer.element_size())

    def _account(self, bounds: Sequence[int], element_size: int) -> None:
        assert self.group is not None
        chunk = (bounds[1] - bounds[0]) * element_size
        moved = (len(self.ranks) - 1) * chunk
        self.comm.stats.add_group(self.group.name, sent=moved, received=moved)
