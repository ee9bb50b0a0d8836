"""Several split_nn jobs one after another in one world (benchmarks: start processes once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tessera_ml.algorithms.split_nn.rank import run
from tessera_ml.comm.base import Communicator
from tessera_ml.context import RankContext
from tessera_ml.report import MemoryReporter
from tessera_ml.spec import Assignment


@dataclass(frozen=True)
class Job:
    assignments: list[dict[str, Any]]
    config: dict[str, Any]


def run_jobs(comm: Communicator, jobs: list[Job]) -> list[dict[str, Any]]:
    """This rank's result of every job, planned exactly as the control plane plans them."""
    from tessera_ml.algorithms.split_nn.spec import SPEC

    out = []
    for job in jobs:
        cfg = SPEC.parse_config(job.config)
        plan = SPEC.make_plan([Assignment.model_validate(a) for a in job.assignments], cfg)
        comm.stats.reset()
        reporter = MemoryReporter()
        ctx = RankContext(
            rank=comm.rank,
            world_size=comm.world_size,
            slot=plan[comm.rank],
            plan=plan,
            config=cfg,
            comm=comm,
            reporter=reporter,
        )
        result = run(ctx)
        result["metrics"] = [(p.step, p.name, p.value) for p in reporter.points]
        out.append(result)
    return out
