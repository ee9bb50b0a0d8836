"""Reduce-scatter and all-gather inside a node: shared memory, NCCL's own, or the rings.

- A node's CPU devices on one host (``share``, where the job's ``intra_node_transport`` is
  ``auto``) share their buffers (``shared_node.py``): a reduce-scatter reads the device's own
  piece from its peers, an all-gather is a barrier.
- Under NCCL, a bucket whose pieces are all equal (equal slicing on an aligned bucket) uses
  NCCL's collectives, which take equal chunks only; bytes are accounted to the group
  ``intra_node.<node>`` with the ring formulas.
- Any other bucket takes the p2p rings of ``ring.py`` (gloo's reduce-scatter moves twice the
  bytes).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist

from tessera_ml.algorithms.hier_sync import ring
from tessera_ml.algorithms.hier_sync.flat import FlatParams
from tessera_ml.algorithms.hier_sync.shared_node import SharedNode
from tessera_ml.algorithms.hier_sync.topology import Topology
from tessera_ml.comm.base import Communicator, Group


class NodeOps:
    def __init__(self, comm: Communicator, topology: Topology) -> None:
        self.comm = comm
        self.ranks = topology.node_ranks(comm.rank)
        self.position = self.ranks.index(comm.rank)
        self.group: Group | None = None
        self.shared: SharedNode | None = None
        if getattr(comm, "backend", "gloo") == "nccl" and len(self.ranks) > 1:
            for node, ranks in enumerate(topology.nodes):  # collective: every rank, every group
                group = comm.new_group(ranks, f"intra_node.{node}")
                if comm.rank in ranks:
                    self.group = group

    def share(self, flat: FlatParams, pieces: Sequence[tuple[int, int]]) -> None:
        """Move ``flat``'s buffers into memory the node's devices share, where they can (CPU
        devices on one host, not under NCCL). Collective over the node; ``pieces`` are this
        device's ranges of the parameters."""
        if self.group is None and len(self.ranks) > 1 and flat.param.device.type == "cpu":
            self.shared = SharedNode.connect(self.comm, self.ranks, flat, pieces)

    @property
    def transport(self) -> str:
        """How the node's devices exchange: ``shared_memory``, ``nccl`` or ``ring``."""
        if self.shared is not None:
            return "shared_memory"
        return "nccl" if self.group is not None else "ring"

    def _native(self, bounds: Sequence[int]) -> bool:
        sizes = {bounds[j + 1] - bounds[j] for j in range(len(bounds) - 1)}
        return self.group is not None and len(sizes) == 1 and 0 not in sizes

    def reduce_scatter(self, buffer: torch.Tensor, bounds: Sequence[int]) -> None:
        if self.shared is not None:
            self.shared.reduce_scatter(bounds)
            return
        if not self._native(bounds):
            ring.reduce_scatter(self.comm, self.ranks, buffer, bounds)
            return
        assert self.group is not None
        start, end = bounds[self.position], bounds[self.position + 1]
        out = torch.empty(end - start, dtype=buffer.dtype, device=buffer.device)
        dist.reduce_scatter_tensor(out, buffer[bounds[0] : bounds[-1]], group=self.group.handle)
        buffer[start:end].copy_(out)
        self._account(bounds, buffer.element_size())

    def all_gather(self, buffer: torch.Tensor, buckets: Sequence[Sequence[int]]) -> None:
        """Every bucket's pieces from their devices into ``buffer`` (the parameters)."""
        if self.shared is not None:
            self.shared.barrier()
            return
        for bounds in buckets:
            self._all_gather_bucket(buffer, bounds)

    def _all_gather_bucket(self, buffer: torch.Tensor, bounds: Sequence[int]) -> None:
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
