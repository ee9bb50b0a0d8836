"""Roles and configuration of ``mpc_mixed`` (no torch here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from tessera_ml.data.refs import checked_ref
from tessera_ml.spec import (
    OPERATIONAL_METRICS,
    AlgorithmConfig,
    AlgorithmSpec,
    Assignment,
    PlanError,
    RankSlot,
    RoleSpec,
)


def _bundled_or_ref(value: str) -> str:
    """A dataset reference; a bare name (``digits``) means the bundled scikit-learn set."""
    checked_ref(value if ":" in value else f"sklearn:{value}")
    return value


class MpcMixedConfig(AlgorithmConfig):
    """Secure two-party training; the dashboard renders this form."""

    mode: Literal["mixed", "all64", "all32"] = Field(
        default="mixed",
        description=(
            "mixed: forward in Z_2^32 at ring32_frac bits, backward in Z_2^64 at ring64_frac bits; "
            "all64 / all32: everything in one ring, for comparison"
        ),
    )
    ring32_frac: int = Field(
        default=12, ge=8, le=14, description="Fixed-point fractional bits in Z_2^32"
    )
    comparison: Literal["tree", "fan_in"] = Field(
        default="tree",
        description=(
            "tree: a comparison combines two chunks per round on XOR-shared ring words; "
            "fan_in: one round for Z_2^32's chunks, two for Z_2^64's, a few bits per element"
        ),
    )
    truncation: Literal["masked", "local"] = Field(
        default="masked",
        description=(
            "How Z_2^64 shares are truncated after a product: masked, one round opening x + r; "
            "local, each party shifts its own share (no round, no material), off by 2^(64 - d) "
            "with probability |x| / 2^64 per element. Z_2^32 truncations are always masked"
        ),
    )
    link: Literal["direct", "communicator"] = Field(
        default="direct",
        description=(
            "How the compute parties exchange each round: direct, a TLS 1.3 connection of their "
            "own (falls back to the communicator if it cannot be made); communicator, the job's "
            "point-to-point messages"
        ),
    )
    ring64_frac: int = Field(
        default=20, ge=14, le=24, description="Fixed-point fractional bits in Z_2^64"
    )
    dataset: Annotated[str, AfterValidator(_bundled_or_ref)] = Field(
        default="digits",
        description="Dataset reference (e.g. sklearn:digits) when the data parties name none",
    )
    model: Literal["mlp", "cnn"] = Field(
        default="mlp",
        description=(
            "mlp: Linear -> BatchNorm -> ReLU per hidden layer, then Linear; cnn (8x8 images): "
            "3x3 convolution -> BatchNorm -> ReLU -> 2x2 sum pooling -> Linear"
        ),
    )
    channels: int = Field(default=8, ge=1, le=64, description="Convolution channels (cnn)")
    hidden: list[int] = Field(
        default_factory=lambda: [64],
        min_length=1,
        max_length=4,
        description="Hidden layer widths (Linear -> BatchNorm -> ReLU each)",
    )
    batch_norm: bool = Field(
        default=True, description="Batch normalisation after each hidden linear layer"
    )
    batch_size: int = Field(default=128, ge=2, le=1024, description="Samples per step")
    epochs: int = Field(default=8, ge=1, le=1000, description="Passes over the training rows")
    max_steps: int | None = Field(
        default=None, ge=1, description="Stop after this many steps (None: all epochs)"
    )
    learning_rate: float = Field(default=0.5, gt=0, le=10, description="SGD step size")
    log_every: int = Field(
        default=10, ge=1, description="Steps between training-loss reports (labels party)"
    )
    eval_every_epochs: int = Field(
        default=1, ge=1, description="Epochs between test-set evaluations"
    )
    reveal_to: list[str] = Field(
        default_factory=list,
        description="Parties that receive the trained model in the clear (never the dealer)",
    )

    @model_validator(mode="after")
    def _precisions(self) -> MpcMixedConfig:
        if self.mode == "mixed" and self.ring64_frac <= self.ring32_frac:
            raise ValueError("ring64_frac must exceed ring32_frac in mixed mode")
        if self.mode == "all32" and self.truncation == "local":
            raise ValueError("truncation local applies to Z_2^64, which all32 does not use")
        return self


MPC_OPERATIONAL = (
    *OPERATIONAL_METRICS,
    "whole_step_time_s",
    "online_*",
    "offline_*",
    "link_*",
)
"""What the compute parties, the dealer and the features party see of others: the protocol's
costs, not the loss and accuracy only the labels party learns."""

ROLES = (
    RoleSpec(
        name="compute",
        min=2,
        max=2,
        description="Holds additive shares and computes",
        max_processes=1,
        device_note="its layers are integer matrix products on the shares, and torch has no "
        "CUDA kernel for integer matmul",
        sees_metrics=MPC_OPERATIONAL,
    ),
    RoleSpec(
        name="dealer",
        min=1,
        max=1,
        description="Generates correlated randomness",
        max_processes=1,
        sees_metrics=MPC_OPERATIONAL,
    ),
    RoleSpec(
        name="features",
        min=1,
        max=1,
        description="Secret-shares the sample features",
        max_processes=1,
        sees_metrics=MPC_OPERATIONAL,
    ),
    RoleSpec(
        name="labels",
        min=1,
        max=1,
        description="Secret-shares the labels; sees metrics",
        max_processes=1,
    ),
)


@dataclass(frozen=True)
class MpcMixedSpec(AlgorithmSpec):
    def check(
        self, assignments: Sequence[Assignment], config: AlgorithmConfig, slots: list[RankSlot]
    ) -> None:
        assert isinstance(config, MpcMixedConfig)
        compute = [a.party for a in assignments if a.role == "compute"]
        dealer = next(a.party for a in assignments if a.role == "dealer")
        if compute[0] == compute[1]:
            raise PlanError(
                "compute_parties", "the two compute parties must differ", ("assignments",)
            )
        if dealer in compute:
            raise PlanError(
                "dealer_computes",
                f"party {dealer!r} cannot be both dealer and compute party",
                ("assignments",),
            )
        parties = {a.party for a in assignments}
        for j, party in enumerate(config.reveal_to):
            if party not in parties:
                raise PlanError(
                    "reveal_unknown_party",
                    f"party {party!r} is not part of the job",
                    ("config", "reveal_to", j),
                )
            if party == dealer:
                raise PlanError(
                    "reveal_to_dealer",
                    "the dealer never sees the model",
                    ("config", "reveal_to", j),
                )


SPEC = MpcMixedSpec(
    name="mpc_mixed",
    title="Secure training on mixed rings",
    summary=(
        "Two compute parties train on additive secret shares: forward pass in Z_2^32 at low "
        "precision, backward pass and weights in Z_2^64 at high precision, batch normalisation in "
        "Z_2^64; a dealer supplies correlated randomness."
    ),
    roles=ROLES,
    config_model=MpcMixedConfig,
    entry_point="tessera_ml.algorithms.mpc_mixed.train:run",
    metrics=(
        "loss",
        "eval_loss",
        "accuracy",
        "whole_step_time_s",
        "step_time_s",
        "step_cpu_s",
        "offline_time_s",
        "online_bytes",
        "online_rounds",
        "offline_bytes",
        "bytes_sent",
        "bytes_received",
        "throughput",
        "progress",
    ),
)
