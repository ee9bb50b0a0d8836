"""What each device offers, measured (GPU) or configured (CPU), shared by all ranks.

On CUDA, memory is the device's free memory (``torch.cuda.mem_get_info``, with the model and
its gradient buffer already placed) and compute its multiprocessor count. On CPU, memory is the
option ``memory_bytes`` (one budget per process, less the full parameters and gradient buffer
every device holds) or else the assignment's ``capacity`` entry for the process (a relative
figure, default 1); compute is the option ``compute`` (one per process; default the rank's
torch thread count). The job's ``capacities`` replace both. Where budgets are known in bytes,
slices whose optimizer state would not fit are refused (``slice_exceeds_memory``).
"""

from __future__ import annotations

import torch

from tessera_ml.algorithms.hier_sync.slicing import (
    DeviceCapacity,
    SliceTooLarge,
    capacity_fractions,
    check_fits,
    normalise,
)
from tessera_ml.algorithms.hier_sync.spec import HierSyncConfig
from tessera_ml.algorithms.hier_sync.topology import Topology
from tessera_ml.comm.base import Communicator
from tessera_ml.spec import RankSlot


def _per_process(slot: RankSlot, option: str) -> float | None:
    configured = slot.options.get(option)
    if isinstance(configured, list) and len(configured) > slot.local_index:
        return float(configured[slot.local_index])
    return None


def local_capacity(
    slot: RankSlot, device: torch.device, placed_bytes: int = 0
) -> tuple[float, float, float | None]:
    """``(memory, compute, budget)`` of this rank's device; ``budget`` is the bytes free for
    optimizer state (``None`` where unknown), ``placed_bytes`` what the model already takes."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        processors = torch.cuda.get_device_properties(device).multi_processor_count
        return float(free), float(processors), float(free)
    compute = _per_process(slot, "compute")
    if compute is None:
        compute = float(torch.get_num_threads())
    if compute <= 0:
        raise ValueError(f"option compute must be positive, got {compute}")
    memory_bytes = _per_process(slot, "memory_bytes")
    if memory_bytes is not None:
        budget = memory_bytes - placed_bytes
        return budget, compute, budget
    memory = slot.capacity if slot.capacity is not None else 1.0
    return float(memory), compute, None


def optimizer_slots(config: HierSyncConfig) -> int:
    """Optimizer state per parameter element, in parameter-sized tensors."""
    if config.optimizer == "sgd":
        return 1 if config.momentum else 0
    return 2


def agreed_fractions(
    comm: Communicator,
    topology: Topology,
    config: HierSyncConfig,
    slot: RankSlot,
    device: torch.device,
    param_bytes: int = 0,
) -> tuple[list[float], list[DeviceCapacity]]:
    """The target slice fraction per device number, identical on every rank.

    ``param_bytes`` is the size of the full parameters; every device holds them and a gradient
    buffer of the same size whatever its slice.
    """
    node, number = topology.locate(comm.rank)
    memory, compute, budget = local_capacity(slot, device, 2 * param_bytes)
    gathered = comm.all_gather_data((node, number, memory, compute, budget))
    reports = [
        DeviceCapacity(int(n), int(d), float(m), float(c), None if b is None else float(b))
        for n, d, m, c, b in gathered
    ]
    for r in reports:
        if r.budget is not None and r.budget <= 0:
            raise SliceTooLarge(
                f"device {r.number} of node {r.node} cannot hold the parameters and gradient "
                f"buffer ({2 * param_bytes} bytes) in its memory budget"
            )
    k = topology.devices_per_node
    if config.capacities is not None:
        fractions = normalise(config.capacities)
    else:
        fractions = capacity_fractions(config.slicing, reports, k)
    check_fits(config.slicing, fractions, reports, optimizer_slots(config) * param_bytes)
    return fractions, reports
