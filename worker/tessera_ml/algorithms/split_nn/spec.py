"""Role-based split learning: metadata, configuration schema and plan checks (no torch here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from tessera_ml.data.refs import DatasetRef
from tessera_ml.spec import (
    IMPORTS_CODE,
    OPERATIONAL_METRICS,
    AlgorithmConfig,
    AlgorithmSpec,
    Assignment,
    PlanError,
    RankSlot,
    RoleSpec,
    StrictModel,
)

Combine = Literal["concat", "sum", "mean"]
Compression = Literal["none", "fp16", "int8"]


class ModelSpec(StrictModel):
    """One of the three ordinary models: a built-in MLP or a ``module:callable`` on the worker."""

    kind: Literal["mlp", "custom"] = Field(
        default="mlp", description="Built-in MLP, or a custom factory installed on the worker"
    )
    hidden: list[int] = Field(
        default_factory=list, description="Hidden layer widths of the MLP (empty: one linear layer)"
    )
    out: int | None = Field(
        default=None,
        ge=1,
        description="Output width; required for the bottom and middle MLPs, the top MLP's "
        "width is set by the label party's task (number of classes, or 1)",
    )
    activation: Literal["relu", "tanh"] = Field(
        default="relu",
        description="Activation between layers (and after the last bottom/middle layer)",
    )
    factory: Annotated[str | None, IMPORTS_CODE] = Field(
        default=None,
        description="For kind=custom: 'module:callable' installed on the worker, called with "
        "kwargs (plus in_features and out_features when its signature names them), returning "
        "a torch module",
    )
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="For kind=custom: keyword arguments of the factory"
    )

    @model_validator(mode="after")
    def _custom_needs_factory(self) -> ModelSpec:
        if self.kind == "custom" and not self.factory:
            raise ValueError("kind=custom needs factory='module:callable'")
        if self.factory is not None and ":" not in self.factory:
            raise ValueError(f"factory must look like 'module:callable', got {self.factory!r}")
        return self


class SplitNNConfig(AlgorithmConfig):
    """Configuration of a split-learning job."""

    dataset: DatasetRef = Field(
        default="sklearn:digits",
        description="Dataset reference used by a party whose assignment names none",
    )
    steps: int = Field(default=200, ge=1, le=10_000_000, description="Training steps (batches)")
    batch_size: int = Field(default=64, ge=1, le=1_000_000, description="Samples per step")
    micro_batches: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="Micro-batches per step (one optimizer step per batch)",
    )
    pipelined: bool = Field(
        default=True,
        description="Overlap one micro-batch's communication with another's computation",
    )
    combine: Combine = Field(
        default="concat", description="How the outputs of several feature parties are combined"
    )
    compression: Compression = Field(
        default="none", description="Encoding of activations and gradients crossing each cut"
    )
    dtype: Literal["float32", "float64"] = Field(
        default="float32", description="Floating-point type of models and tensors"
    )
    optimizer: Literal["sgd", "adam"] = Field(default="sgd", description="Optimizer of every role")
    lr: float = Field(default=0.05, gt=0, description="Learning rate")
    momentum: float = Field(default=0.9, ge=0, lt=1, description="SGD momentum")
    bottom: ModelSpec = Field(
        default_factory=lambda: ModelSpec(hidden=[64], out=32),
        description="First model: runs at each feature party on its own columns",
    )
    middle: ModelSpec = Field(
        default_factory=lambda: ModelSpec(hidden=[64], out=32),
        description="Second model: the remaining layers, at the middle party (or the label party)",
    )
    top: ModelSpec = Field(
        default_factory=ModelSpec,
        description="Third model: the head and loss, at the label party",
    )
    eval_every: int = Field(
        default=50,
        ge=0,
        description="Evaluate on the test split every N steps (0: only at the end)",
    )
    report_every: int = Field(default=10, ge=1, description="Report metrics every N steps")
    checkpoint_every: int = Field(
        default=0, ge=0, description="Checkpoint every N steps (0: never)"
    )
    stop_check_every: int = Field(
        default=10, ge=1, description="Agree on stopping (cancellation) every N steps"
    )

    @model_validator(mode="after")
    def _widths(self) -> SplitNNConfig:
        for name in ("bottom", "middle"):
            spec: ModelSpec = getattr(self, name)
            if spec.kind == "mlp" and spec.out is None:
                raise ValueError(f"{name}.out is required for an MLP")
        return self


class SplitNNSpec(AlgorithmSpec):
    def check(
        self, assignments: Sequence[Assignment], config: AlgorithmConfig, slots: list[RankSlot]
    ) -> None:
        assert isinstance(config, SplitNNConfig)
        for i, a in enumerate(assignments):
            if a.role == "middle" and a.dataset is not None:
                raise PlanError(
                    "middle_has_data",
                    "the middle party holds neither features nor labels: give it no dataset",
                    ("assignments", i, "dataset"),
                )
        if config.batch_size < config.micro_batches:
            raise PlanError(
                "micro_batches",
                f"{config.micro_batches} micro-batches do not fit a batch of {config.batch_size}",
                ("config", "micro_batches"),
            )


SPEC = SplitNNSpec(
    name="split_nn",
    title="Split learning",
    summary=(
        "Three ordinary models (bottom on features, middle, top with the loss) run as one "
        "distributed model: feature parties send activations forward, gradients come back, "
        "raw features and labels never leave their owners."
    ),
    roles=(
        RoleSpec(
            name="feature",
            min=1,
            max=None,
            description="Holds feature columns; runs the first model",
            max_processes=1,
            devices=("cpu", "cuda"),
            gpu_benefit=True,
            sees_metrics=OPERATIONAL_METRICS,
        ),
        RoleSpec(
            name="middle",
            min=0,
            max=1,
            description="Holds no data; runs the second model",
            max_processes=1,
            devices=("cpu", "cuda"),
            gpu_benefit=True,
            sees_metrics=OPERATIONAL_METRICS,
        ),
        RoleSpec(
            name="label",
            min=1,
            max=1,
            description="Holds the labels; runs the third model and the loss",
            max_processes=1,
            devices=("cpu", "cuda"),
            gpu_benefit=True,
        ),
    ),
    config_model=SplitNNConfig,
    entry_point="tessera_ml.algorithms.split_nn.rank:run",
    metrics=(
        "loss",
        "eval_loss",
        "accuracy",
        "auc",
        "step_time_s",
        "throughput",
        "bytes_sent",
        "bytes_received",
        "bytes_per_step",
        "link_bytes_sent",
        "progress",
    ),
)
