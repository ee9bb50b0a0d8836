"""Which ranks form a node and which devices share a number: read from the rank plan.

Torch-free, so the job validation in ``spec.py`` can use it. An assignment of role ``node``
contributes ``processes / devices_per_node`` nodes (option ``devices_per_node``, default: all of
its processes form one node). Device numbers count from 0 inside each node; the cross-node
group of number ``d`` joins device ``d`` of every node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tessera_ml.errors import CodedError
from tessera_ml.spec import RankSlot

ROLE = "node"


class TopologyError(CodedError):
    """The assignments cannot be cut into nodes of the same size."""

    def __init__(self, code: str, reason: str, assignment_index: int | None = None) -> None:
        super().__init__(code, reason)
        self.assignment_index = assignment_index


@dataclass(frozen=True)
class Topology:
    """``nodes[n][d]`` is the global rank of device number ``d`` of node ``n``."""

    nodes: tuple[tuple[int, ...], ...]

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def devices_per_node(self) -> int:
        return len(self.nodes[0])

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.devices_per_node

    def locate(self, rank: int) -> tuple[int, int]:
        """``(node, device number)`` of a global rank."""
        for n, ranks in enumerate(self.nodes):
            if rank in ranks:
                return n, ranks.index(rank)
        raise KeyError(f"rank {rank} is not a node device")

    def node_ranks(self, rank: int) -> tuple[int, ...]:
        """The devices of ``rank``'s node, by device number (the intra-node group)."""
        return self.nodes[self.locate(rank)[0]]

    def peer_ranks(self, rank: int) -> tuple[int, ...]:
        """Devices with ``rank``'s number in every node, by node (the inter-node group)."""
        number = self.locate(rank)[1]
        return tuple(ranks[number] for ranks in self.nodes)


def devices_per_node_option(slot: RankSlot, processes: int) -> int:
    raw = slot.options.get("devices_per_node", processes)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise TopologyError(
            "devices_per_node",
            f"option devices_per_node must be a positive integer, got {raw!r}",
            slot.assignment_index,
        )
    if processes % raw:
        raise TopologyError(
            "devices_per_node",
            f"{processes} processes cannot be cut into nodes of {raw} devices",
            slot.assignment_index,
        )
    return raw


def topology_from_plan(plan: Sequence[RankSlot]) -> Topology:
    """Cut each ``node`` assignment's ranks into nodes; every node must have the same size."""
    by_assignment: dict[int, list[RankSlot]] = {}
    for slot in plan:
        if slot.role == ROLE:
            by_assignment.setdefault(slot.assignment_index, []).append(slot)
    if not by_assignment:
        raise TopologyError("no_nodes", "the job has no rank of role 'node'")
    nodes: list[tuple[int, ...]] = []
    sizes: dict[int, int] = {}
    for index in sorted(by_assignment):
        slots = sorted(by_assignment[index], key=lambda s: s.local_index)
        k = devices_per_node_option(slots[0], len(slots))
        sizes[index] = k
        for start in range(0, len(slots), k):
            nodes.append(tuple(s.rank for s in slots[start : start + k]))
    if len(set(sizes.values())) > 1:
        detail = ", ".join(f"assignment {i}: {k}" for i, k in sizes.items())
        raise TopologyError(
            "uneven_nodes",
            "every node must have the same number of devices, since device d of each node "
            f"joins the cross-node group d ({detail})",
            max(sizes, key=lambda i: sizes[i]),
        )
    return Topology(tuple(nodes))
