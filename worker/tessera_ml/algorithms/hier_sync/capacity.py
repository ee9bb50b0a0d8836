"""What each device offers, measured (GPU) or configured (CPU), shared by all ranks.

On CUDA, memory is the device's free memory (``torch.cuda.mem_get_info``) and compute its
multiprocessor count. On CPU, memory is the assignment's ``capacity`` entry for the process
(default 1) and compute the option ``compute`` (a list, one per process; default the rank's
torch thread count). The job's ``capacities`` replace both.
"""

from __future__ import annotations

import torch

from tessera_ml.algorithms.hier_sync.slicing import (
    DeviceCapacity,
    capacity_fractions,
    normalise,
)
from tessera_ml.algorithms.hier_sync.spec import HierSyncConfig
from tessera_ml.algorithms.hier_sync.topology import Topology
from tessera_ml.comm.base import Communicator
from tessera_ml.spec import RankSlot


def local_capacity(slot: RankSlot, device: torch.device) -> tuple[float, float]:
    """``(memory, compute)`` of this rank's device."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        processors = torch.cuda.get_device_properties(device).multi_processor_count
        return float(free), float(processors)
    memory = slot.capacity if slot.capacity is not None else 1.0
    configured = slot.options.get("compute")
    if isinstance(configured, list) and len(configured) > slot.local_index:
        compute = float(configured[slot.local_index])
    else:
        compute = float(torch.get_num_threads())
    if compute <= 0:
        raise ValueError(f"option compute must be positive, got {compute}")
    return float(memory), compute


def agreed_fractions(
    comm: Communicator,
    topology: Topology,
    config: HierSyncConfig,
    slot: RankSlot,
    device: torch.device,
) -> tuple[list[float], list[DeviceCapacity]]:
    """The target slice fraction per device number, identical on every rank."""
    node, number = topology.locate(comm.rank)
    memory, compute = local_capacity(slot, device)
    gathered = comm.all_gather_data((node, number, memory, compute))
    reports = [DeviceCapacity(int(n), int(d), float(m), float(c)) for n, d, m, c in gathered]
    k = topology.devices_per_node
    if config.capacities is not None:
        return normalise(config.capacities), reports
    return capacity_fractions(config.slicing, reports, k), reports
