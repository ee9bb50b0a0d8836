"""Job metadata of ``ddp``: one role, ``trainer``, played by one or more parties."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tessera_ml.data.refs import DatasetRef
from tessera_ml.models.spec import MLPSpec, ModelSpec
from tessera_ml.spec import AlgorithmConfig, AlgorithmSpec, RoleSpec


class TrainingConfig(AlgorithmConfig):
    """Model, data and optimizer of data-parallel training, read the same way by ``ddp`` and
    ``hier_sync`` (so the two can be compared parameter for parameter)."""

    model: ModelSpec = Field(
        default_factory=lambda: MLPSpec(hidden=[64]),
        description="Model spec (kind mlp, cnn, click or custom); sizes come from the dataset",
    )
    dataset: DatasetRef = Field(
        default="sklearn:digits",
        description="Dataset reference used when an assignment names none; its training rows "
        "are sharded over all the job's ranks",
    )
    steps: int = Field(default=200, ge=1, le=10_000_000, description="Training steps")
    batch_size: int = Field(default=32, ge=1, le=65_536, description="Samples per rank per step")
    optimizer: Literal["sgd", "adam", "adamw"] = Field(default="sgd", description="Optimizer")
    lr: float = Field(default=0.05, gt=0, description="Learning rate")
    momentum: float = Field(default=0.9, ge=0, lt=1, description="SGD momentum")
    weight_decay: float = Field(default=0.0, ge=0, description="Weight decay")


class DDPConfig(TrainingConfig):
    """Training settings of a ``ddp`` job; every trainer rank runs the same model."""

    eval_interval: int = Field(
        default=50, ge=0, description="Evaluate every N steps (0: only at the end)"
    )
    checkpoint_interval: int = Field(
        default=0, ge=0, description="Checkpoint every N steps (0: never)"
    )
    log_interval: int = Field(default=10, ge=1, description="Report metrics every N steps")


SPEC = AlgorithmSpec(
    name="ddp",
    title="Data parallel (flat all-reduce)",
    summary="Every trainer rank holds the whole model and a shard of the data; gradients are "
    "averaged with one flat all-reduce per step. The baseline and the platform's smoke job.",
    roles=(
        RoleSpec(
            name="trainer",
            min=1,
            max=None,
            description="Trains on its shard; a party's own dataset is sharded over its processes",
        ),
    ),
    config_model=DDPConfig,
    entry_point="tessera_ml.algorithms.ddp.train:run",
    metrics=(
        "loss",
        "eval_loss",
        "accuracy",
        "auc",
        "step_time_s",
        "throughput",
        "bytes_sent",
        "bytes_received",
        "bytes_sent.group.world",
        "state_bytes",
        "progress",
        "link_bytes_sent",
    ),
)
