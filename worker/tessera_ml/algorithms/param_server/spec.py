"""Roles, configuration and plan rules of ``param_server`` (torch-free)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from tessera_ml.data.refs import DataRefError, parse_ref
from tessera_ml.spec import (
    OPERATIONAL_METRICS,
    AlgorithmConfig,
    AlgorithmSpec,
    Assignment,
    PlanError,
    RankSlot,
    RoleSpec,
    StrictModel,
)

SERVER = "server"
WORKER = "worker"


class ClickLogConfig(StrictModel):
    """The generated click log every worker reads its share of."""

    num_fields: int = Field(default=3, ge=1, le=64, description="Id fields per sample")
    vocab: int = Field(
        default=10_000, ge=2, le=1 << 36, description="Distinct ids per field (popularity ranks)"
    )
    zipf_a: float = Field(
        default=1.1, gt=1.0, le=4.0, description="Exponent of the Zipf law of id popularity"
    )
    train_samples: int = Field(
        default=0,
        ge=0,
        description="Length of the training log (0: an endless stream of fresh samples)",
    )


class ParamServerConfig(AlgorithmConfig):
    """Parameter servers with dynamic embedding tables; workers train the dense tower."""

    steps: int = Field(default=500, ge=1, le=10_000_000, description="Training steps")
    batch_size: int = Field(
        default=4096, ge=1, le=1 << 20, description="Samples per worker per step"
    )
    dim: int = Field(default=16, ge=1, le=1024, description="Embedding dimension")
    hidden: list[int] = Field(
        default_factory=lambda: [64, 32],
        max_length=16,
        description="Hidden layer widths of the dense MLP over the concatenated embeddings",
    )
    interactions: bool = Field(
        default=True,
        description="Add the pairwise dot products of the field embeddings to the logit "
        "(a factorisation machine beside the MLP)",
    )
    sparse_optimizer: Literal["sgd", "adagrad", "adam"] = Field(
        default="adagrad", description="Optimizer the servers apply to embedding rows"
    )
    sparse_lr: float = Field(default=0.1, gt=0, le=100.0, description="Embedding learning rate")
    dense_lr: float = Field(
        default=1e-3, gt=0, le=10.0, description="Learning rate of the workers' dense Adam"
    )
    init_scale: float = Field(
        default=0.05, ge=0, le=10.0, description="New rows start uniform in [-scale, scale)"
    )
    mode: Literal["sync", "async"] = Field(
        default="sync",
        description="sync: a step's updates are applied before the next pull; async: pulls may "
        "miss the updates of the last `staleness` steps",
    )
    staleness: int = Field(
        default=1,
        ge=1,
        le=64,
        description="async only: how many steps a worker's pull may run ahead of the updates",
    )
    dedup: bool = Field(
        default=True,
        description="Workers send each id of a batch once and sum its gradients before sending",
    )
    admission_count: int = Field(
        default=1,
        ge=1,
        le=1_000_000,
        description="Create a row only once its id was seen this many times (1: at once)",
    )
    eviction: Literal["none", "ttl", "lfu"] = Field(
        default="none",
        description="none; ttl: drop rows idle for ttl_steps; lfu: keep the max_rows most used",
    )
    ttl_steps: int = Field(default=1000, ge=1, description="ttl eviction: idle steps allowed")
    max_rows: int = Field(default=1_000_000, ge=1, description="lfu eviction: rows kept per server")
    evict_every: int = Field(default=100, ge=1, description="Steps between eviction passes")
    preset_rows: int = Field(
        default=0,
        ge=0,
        description="Rows per server expected before training; the export notes when the "
        "actual range differs",
    )
    block_rows: int = Field(
        default=16384, ge=64, le=1 << 24, description="Rows per storage block (a power of two)"
    )
    table: Literal["auto", "torch"] = Field(
        default="auto",
        description="auto: the compiled hash table on CPU where it is built, torch operations "
        "otherwise and on a GPU; torch: torch operations always",
    )
    data: ClickLogConfig = Field(
        default_factory=ClickLogConfig,
        description="The generated click log read by workers whose assignment names no dataset",
    )
    eval_every: int = Field(
        default=0, ge=0, description="Evaluate every this many steps (0: only at the end)"
    )
    eval_samples: int = Field(
        default=20_000,
        ge=0,
        le=10_000_000,
        description="Held-out samples of the generated log for AUC and loss "
        "(party datasets use their own test split)",
    )
    checkpoint_every: int = Field(
        default=0, ge=0, description="Checkpoint every this many steps (0: only the final export)"
    )

    @model_validator(mode="after")
    def _check(self) -> ParamServerConfig:
        if any(w < 1 or w > 65_536 for w in self.hidden):
            raise ValueError("hidden widths must be between 1 and 65536")
        if self.block_rows & (self.block_rows - 1):
            raise ValueError(f"block_rows must be a power of two, got {self.block_rows}")
        return self


@dataclass(frozen=True)
class ParamServerSpec(AlgorithmSpec):
    def check(
        self, assignments: Sequence[Assignment], config: object, slots: list[RankSlot]
    ) -> None:
        assert isinstance(config, ParamServerConfig)
        if config.mode == "sync" and "staleness" in config.model_fields_set:
            raise PlanError(
                "staleness_without_async",
                "staleness has no effect in sync mode; set mode to async or drop it",
                ("config", "staleness"),
            )
        unused = {"ttl": "max_rows", "lfu": "ttl_steps"}.get(config.eviction)
        if config.eviction == "none":
            stray = {"ttl_steps", "max_rows", "evict_every"} & config.model_fields_set
        else:
            stray = {unused} & config.model_fields_set if unused else set()
        if stray:
            name = sorted(stray)[0]
            raise PlanError(
                "option_without_effect",
                f"{name} has no effect with eviction {config.eviction!r}",
                ("config", name),
            )
        for i, a in enumerate(assignments):
            if a.dataset is None:
                continue
            if a.role != WORKER:
                raise PlanError(
                    "dataset_on_server",
                    "only workers hold training data; servers create their rows from it",
                    ("assignments", i, "dataset"),
                )
            try:
                parse_ref(a.dataset)
            except DataRefError as exc:
                raise PlanError(exc.code, exc.reason, ("assignments", i, "dataset")) from exc


SPEC = ParamServerSpec(
    name="param_server",
    title="Parameter servers with dynamic embeddings",
    summary="Servers hold embedding tables that grow with the data (rows created on first "
    "sight, stored in blocks, sparse optimizers beside each row, sharded by id hash); workers "
    "pull the rows of their batch's unique ids, push summed gradients, and train the dense "
    "tower data-parallel.",
    roles=(
        RoleSpec(
            name=SERVER,
            min=1,
            description="Holds a shard of the embedding tables",
            devices=("cpu", "cuda"),
            device_note="on a CPU the table is a compiled hash table in host memory; on a GPU "
            "(device: cuda) it is the torch table in GPU memory",
            sees_metrics=(
                *OPERATIONAL_METRICS,
                "table_rows",
                "rows_created",
                "exported_rows",
                "resident_bytes",
            ),
        ),
        RoleSpec(
            name=WORKER,
            min=1,
            description="Holds training data; trains the dense tower",
            devices=("cpu", "cuda"),
            gpu_benefit=True,
            device_note="the dense tower runs on the rank's GPU; embedding rows travel "
            "to and from the servers through host memory",
        ),
    ),
    config_model=ParamServerConfig,
    entry_point="tessera_ml.algorithms.param_server.rank:run",
    metrics=(
        "loss",
        "auc",
        "eval_loss",
        "step_time_s",
        "throughput",
        "bytes_sent",
        "bytes_received",
        "progress",
        "table_rows",
        "rows_created",
        "resident_bytes",
    ),
)
