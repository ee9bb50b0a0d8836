"""Job metadata of ``ddp``: one role, ``trainer``, played by one or more parties."""

from __future__ import annotations

from pydantic import Field

from tessera_ml.spec import AlgorithmSpec, RoleSpec
from tessera_ml.training.config import TrainingConfig


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
            devices=("cpu", "cuda"),
            gpu_benefit=True,
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
