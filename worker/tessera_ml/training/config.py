"""The configuration data-parallel algorithms share (torch-free: job metadata reads it)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tessera_ml.data.refs import DatasetRef
from tessera_ml.models.spec import MLPSpec, ModelSpec
from tessera_ml.spec import AlgorithmConfig


class TrainingConfig(AlgorithmConfig):
    """Model, data and optimizer of data-parallel training."""

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
