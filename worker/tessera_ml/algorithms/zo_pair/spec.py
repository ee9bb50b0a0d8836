"""Roles, configuration and plan rules of ``zo_pair`` (torch-free)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from tessera_ml.data.refs import DatasetRef
from tessera_ml.models.spec import MLPSpec, ModelSpec
from tessera_ml.spec import (
    AlgorithmConfig,
    AlgorithmSpec,
    Assignment,
    PlanError,
    RankSlot,
    RoleSpec,
)

PROCESSOR = "processor"
Distribution = Literal["rademacher", "gaussian"]


class ZoPairConfig(AlgorithmConfig):
    """Forward-only training: two perturbed forward passes per pair of inputs, scalars exchanged."""

    steps: int = Field(default=1000, ge=1, le=10_000_000, description="Training steps")
    micro_batch: int = Field(
        default=16, ge=1, le=65_536, description="Examples in one input (one micro-batch)"
    )
    epsilon: float = Field(
        default=1e-3, gt=0, le=1.0, description="Perturbation scale: losses at W + εz and W - εz"
    )
    lr: float = Field(default=1e-3, gt=0, le=10.0, description="Peak learning rate of the SGD step")
    lr_schedule: Literal["constant", "linear", "cosine"] = Field(
        default="constant", description="Decay of the learning rate after warm-up, down to 0"
    )
    warmup_steps: int = Field(default=0, ge=0, description="Linear learning-rate warm-up steps")
    weight_decay: float = Field(
        default=0.0, ge=0, le=1.0, description="Decoupled weight decay on matrices (dim ≥ 2)"
    )
    directions: Literal["shared", "per_pair"] = Field(
        default="shared",
        description="shared: one perturbation per step for all; per_pair: each pair its own, "
        "the update averaging the pairs' directions",
    )
    perturbation: Distribution = Field(
        default="rademacher",
        description="Distribution of z: rademacher (random ±1 signs, one random bit per weight) "
        "or gaussian (standard normal, as in MeZO)",
    )
    link: Literal["direct", "communicator"] = Field(
        default="direct",
        description="How the two processors of a two-processor job on CPUs exchange their "
        "losses: direct, a connection of their own (TLS 1.3 between parties; falls back to "
        "the communicator if it cannot be made); communicator, the job's all-gather. More "
        "processors, and processors on GPUs, all-gather over the communicator",
    )
    model: ModelSpec = Field(
        default_factory=lambda: MLPSpec(hidden=[64]),
        description="Model spec (kind mlp, cnn, click or custom); sizes come from the dataset. "
        "Evaluated in eval mode: dropout off, batch-norm statistics frozen",
    )
    dataset: DatasetRef = Field(
        default="sklearn:digits",
        description="Dataset reference used when an assignment names none; its training rows "
        "are sharded over the pairs",
    )
    init_checkpoint: str | None = Field(
        default=None,
        max_length=4096,
        description="Weights to fine-tune from: a state dict file, or a checkpoint folder "
        "holding rank-0.pt (e.g. one written by a ddp job); on a worker it must lie in its data "
        "folder (relative paths are taken there) or its checkpoints folder",
    )
    eval_every: int = Field(
        default=100, ge=0, description="Evaluate every this many steps (0: only at the end)"
    )
    log_every: int = Field(default=10, ge=1, description="Report training metrics every k steps")
    checkpoint_every: int = Field(
        default=0, ge=0, description="Save a checkpoint every this many steps (0: only at the end)"
    )


@dataclass(frozen=True)
class ZoPairSpec(AlgorithmSpec):
    def check(
        self, assignments: Sequence[Assignment], config: AlgorithmConfig, slots: list[RankSlot]
    ) -> None:
        processors = [s for s in slots if s.role == PROCESSOR]
        if len(processors) < 2 or len(processors) % 2:
            raise PlanError(
                "processor_count",
                f"zo_pair needs an even number (at least 2) of processors, got {len(processors)}",
                ("assignments",),
            )
        for first, second in zip(processors[::2], processors[1::2], strict=True):
            if first.dataset != second.dataset:
                raise PlanError(
                    "pair_dataset",
                    f"processors {first.rank} and {second.rank} form a pair and must read the "
                    f"same inputs, but name datasets {first.dataset!r} and {second.dataset!r}",
                    ("assignments", second.assignment_index, "dataset"),
                )


SPEC = ZoPairSpec(
    name="zo_pair",
    title="Forward-only pair training",
    summary="Zeroth-order training without back-propagation: processors 2i and 2i+1 evaluate "
    "the same pair of inputs at W + εz and W - εz, z regenerated layer by layer from a seed "
    "every processor derives; only the losses are all-gathered, and every processor applies "
    "the same update to its own copy.",
    roles=(
        RoleSpec(
            name=PROCESSOR,
            min=1,
            description="Evaluates one side of a pair of inputs and updates its own weight copy",
            devices=("cpu", "cuda"),
            gpu_benefit=True,
            device_note="z is drawn on the rank's device from a shared seed, and CPU and CUDA "
            "generators give different numbers: all ranks run on one kind of device",
        ),
    ),
    config_model=ZoPairConfig,
    entry_point="tessera_ml.algorithms.zo_pair.train:run",
    one_device_type=True,
    metrics=(
        "loss",
        "eval_loss",
        "accuracy",
        "grad_scalar_mean",
        "grad_scalar_std",
        "grad_scalar_abs_max",
        "lr",
        "step_time_s",
        "throughput",
        "bytes_sent",
        "bytes_received",
        "z_generations",
        "progress",
    ),
)
