"""Job metadata of ``hier_sync``: the ``node`` role, the configuration and the plan checks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from tessera_ml.algorithms.hier_sync.slicing import SlicingMode
from tessera_ml.algorithms.hier_sync.topology import ROLE, TopologyError, topology_from_plan
from tessera_ml.spec import (
    AlgorithmConfig,
    AlgorithmSpec,
    Assignment,
    PlanError,
    RankSlot,
    RoleSpec,
)
from tessera_ml.training.config import TrainingConfig


class HierSyncConfig(TrainingConfig):
    """Training (as ``ddp``) and synchronisation settings of a ``hier_sync`` job; the
    optimizer's state is kept only for each device's slice."""

    slicing: SlicingMode = Field(
        default="equal",
        description="How slices are sized: equally, by each device's free memory, or by "
        "free memory and compute",
    )
    capacities: list[float] | None = Field(
        default=None,
        description="Override: relative capacity per device number (one per device of a "
        "node); replaces the measured figures",
    )
    bucket_bytes: int = Field(
        default=4 << 20, ge=1024, description="Gradient bytes per communication bucket"
    )
    align_elements: int = Field(
        default=16, ge=1, description="Slice boundaries fall on multiples of this many elements"
    )
    overlap: bool = Field(
        default=True, description="Synchronise buckets while the backward pass still runs"
    )
    intra_node_transport: Literal["auto", "ring"] = Field(
        default="auto",
        description="How a node's devices exchange: 'auto' shares memory between the CPU "
        "devices of a node on one host (else NCCL or the rings); 'ring' always sends over the "
        "communicator",
    )
    inter_node_compression: Literal["none", "int8", "int4"] = Field(
        default="none",
        description="Quantise the all-reduce between nodes (blockwise, with error feedback); "
        "the phases within a node stay full precision",
    )
    compression_block: int = Field(
        default=256,
        ge=2,
        le=1 << 16,
        multiple_of=2,
        description="Elements per quantisation block (one fp32 scale each)",
    )
    checkpoint_interval: int = Field(
        default=0, ge=0, description="Save each device's slice every N steps (0: never)"
    )
    log_interval: int = Field(default=1, ge=1, description="Report metrics every N steps")


@dataclass(frozen=True)
class HierSyncSpec(AlgorithmSpec):
    def check(
        self, assignments: Sequence[Assignment], config: AlgorithmConfig, slots: list[RankSlot]
    ) -> None:
        assert isinstance(config, HierSyncConfig)
        try:
            topology = topology_from_plan(slots)
        except TopologyError as exc:
            loc: tuple[str | int, ...] = ("assignments",)
            if exc.assignment_index is not None:
                loc = ("assignments", exc.assignment_index)
            raise PlanError(exc.code, exc.reason, loc) from exc
        k = topology.devices_per_node
        if config.capacities is not None:
            if len(config.capacities) != k:
                raise PlanError(
                    "capacities_length",
                    f"capacities has {len(config.capacities)} entries for {k} devices per node",
                    ("config", "capacities"),
                )
            if any(c <= 0 for c in config.capacities):
                raise PlanError(
                    "capacities_value", "capacities must be positive", ("config", "capacities")
                )
            if config.slicing == "equal":
                raise PlanError(
                    "capacities_unused",
                    "capacities are set but slicing is 'equal'; choose 'memory' or "
                    "'memory_and_compute'",
                    ("config", "slicing"),
                )


SPEC = HierSyncSpec(
    name="hier_sync",
    title="Hierarchical sharded gradient synchronisation",
    summary="Nodes of k devices: intra-node reduce-scatter into capacity-proportional slices, "
    "inter-node all-reduce of each slice among same-number devices, sharded optimizer, "
    "intra-node all-gather of the updated parameters.",
    roles=(
        RoleSpec(
            name=ROLE,
            min=1,
            description="A party's nodes of equally many devices (option devices_per_node)",
            devices=("cpu", "cuda"),
            gpu_benefit=True,
        ),
    ),
    config_model=HierSyncConfig,
    entry_point="tessera_ml.algorithms.hier_sync.train:run",
    metrics=(
        "loss",
        "step_time_s",
        "throughput",
        "bytes_sent",
        "bytes_received",
        "bytes_sent.group.intra_node",
        "bytes_sent.group.inter_node",
        "inter_node_bytes_per_step",
        "state_bytes",
        "optimizer_state_bytes",
        "sharded_phase_s",
        "sharded_phase_cpu_s",
        "slice_fraction",
        "progress",
        "eval_loss",
        "accuracy",
        "link_bytes_sent",
    ),
)
