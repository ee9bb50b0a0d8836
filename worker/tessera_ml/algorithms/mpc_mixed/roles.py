"""Who plays which role in a job, and what every role reads from the job's configuration."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.spec import MpcMixedConfig
from tessera_ml.context import RankContext


@dataclass(frozen=True)
class Roles:
    """The ranks of the two compute parties, the dealer and the two data holders."""

    compute: tuple[int, int]
    dealer: int
    features: int
    labels: int

    @staticmethod
    def of(ctx: RankContext) -> Roles:
        c = ctx.ranks_of("compute")
        return Roles(
            (c[0], c[1]),
            ctx.ranks_of("dealer")[0],
            ctx.ranks_of("features")[0],
            ctx.ranks_of("labels")[0],
        )

    @property
    def listeners(self) -> list[int]:
        """The data holders, who wait while the compute parties train. Compute rank 0 sends
        them a short header every step (and evaluation and checkpoint steps), so none of them
        sits in one receive for the whole run."""
        return sorted({self.features, self.labels})


def job_config(ctx: RankContext) -> MpcMixedConfig:
    assert isinstance(ctx.config, MpcMixedConfig)
    return ctx.config


def precision_of(cfg: MpcMixedConfig) -> Precision:
    return Precision.of(cfg.mode, cfg.ring32_frac, cfg.ring64_frac)


def checkpoint_marker(ctx: RankContext) -> Callable[[int], object]:
    """Ranks without state still record each checkpoint step, so a retry finds a step that
    every rank reported."""
    return lambda step: ctx.save_checkpoint(step, {"role": ctx.role})
