"""Several split_nn jobs one after another in one world (benchmarks: start processes once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tessera_ml.algorithms.split_nn.rank import run
from tessera_ml.comm.base import Communicator
from tessera_ml.report import MemoryReporter
from tessera_ml.testing import rank_context


@dataclass(frozen=True)
class Job:
    assignments: list[dict[str, Any]]
    config: dict[str, Any]


def run_jobs(comm: Communicator, jobs: list[Job]) -> list[dict[str, Any]]:
    """This rank's result of every job, planned exactly as the control plane plans them."""
    out = []
    for job in jobs:
        reporter = MemoryReporter()
        ctx = rank_context(comm, "split_nn", job.assignments, job.config, reporter=reporter)
        comm.stats.reset()
        result = run(ctx)
        result["metrics"] = [(p.step, p.name, p.value) for p in reporter.points]
        out.append(result)
    return out
