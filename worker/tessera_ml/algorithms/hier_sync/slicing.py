"""Slice fractions from device capacities, and aligned slice boundaries inside each bucket.

Torch-free. Slice ``d`` of a node belongs to device number ``d``. Because the cross-node group
of number ``d`` all-reduces slice ``d``, slice boundaries are the same on every node: the
capacity of number ``d`` is the smallest capacity that any node's device ``d`` reports (the slice
must fit on each of them, and the slowest of them paces the group).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tessera_ml.errors import CodedError

SlicingMode = Literal["equal", "memory", "memory_and_compute"]


@dataclass(frozen=True)
class DeviceCapacity:
    """What one device offers: free memory (bytes, or a relative figure) and compute."""

    node: int
    number: int
    memory: float
    compute: float
    budget: float | None = None
    """Bytes free for the slice's optimizer state, where known (CUDA, or option
    ``memory_bytes`` on CPU); the full parameters and gradient buffer are already placed."""


class SliceTooLarge(CodedError):
    """A device's slice of the optimizer state does not fit in its memory budget."""

    def __init__(self, reason: str) -> None:
        super().__init__("slice_exceeds_memory", reason)


def check_fits(
    mode: SlicingMode,
    fractions: Sequence[float],
    reports: Sequence[DeviceCapacity],
    full_state_bytes: float,
) -> None:
    """Refuse slices whose optimizer state (``fraction * full_state_bytes``) exceeds the budget
    of a device that holds them; every rank reaches the same verdict from the same reports."""
    for r in sorted(reports, key=lambda r: (r.node, r.number)):
        need = fractions[r.number] * full_state_bytes
        if r.budget is not None and need > r.budget:
            hint = (
                "; slicing 'memory' sizes slices by each device's free memory"
                if mode != "memory"
                else ""
            )
            raise SliceTooLarge(
                f"device {r.number} of node {r.node} has {int(r.budget)} bytes free for "
                f"optimizer state, but its slice ({fractions[r.number]:.3f} of the model, "
                f"slicing '{mode}') needs {int(need)}{hint}"
            )


def normalise(values: Sequence[float]) -> list[float]:
    total = float(sum(values))
    if total <= 0 or any(v <= 0 for v in values):
        raise ValueError(f"capacities must be positive, got {list(values)}")
    return [v / total for v in values]


def capacity_fractions(
    mode: SlicingMode, reports: Sequence[DeviceCapacity], devices_per_node: int
) -> list[float]:
    """Per device number, the share of the model its slice should hold.

    ``memory``: proportional to free memory. ``memory_and_compute``: the mean of the memory
    share and the compute share. ``equal``: ``1/k`` each.
    """
    if mode == "equal":
        return [1.0 / devices_per_node] * devices_per_node
    memory = [min(r.memory for r in reports if r.number == d) for d in range(devices_per_node)]
    memory_share = normalise(memory)
    if mode == "memory":
        return memory_share
    compute = [min(r.compute for r in reports if r.number == d) for d in range(devices_per_node)]
    compute_share = normalise(compute)
    return [(m + c) / 2 for m, c in zip(memory_share, compute_share, strict=True)]


def align_down(offset: int, align: int) -> int:
    return offset - offset % align


def piece_bounds(start: int, end: int, fractions: Sequence[float], align: int) -> list[int]:
    """Boundaries ``b[0]=start <= b[1] <= ... <= b[k]=end`` of the k pieces of a bucket.

    Inner boundaries fall at the cumulative fractions, rounded to the nearest multiple of
    ``align`` elements (absolute offsets), so no piece starts in the middle of an aligned
    block; elementwise optimizers (SGD, Adam) let a boundary fall inside a tensor.
    """
    bounds = [start]
    cumulative = 0.0
    for fraction in fractions[:-1]:
        cumulative += fraction
        target = start + cumulative * (end - start)
        rounded = align_down(int(target + align / 2), align)
        bounds.append(min(max(rounded, bounds[-1]), end))
    bounds.append(end)
    return bounds


def even_bounds(length: int, parts: int, align: int) -> list[int]:
    """Even aligned cut of ``length`` elements into ``parts`` (for the ring all-reduce)."""
    return piece_bounds(0, length, [1.0 / parts] * parts, align)
