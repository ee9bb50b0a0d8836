"""Several platform jobs run one after another on the ranks of one gloo world.

Each job is planned from its assignments exactly as the control plane plans it and run through
its registered entry point. Sharing one world keeps the tests and the quick benchmark short;
``ddp_params`` and ``hier_params`` read the final parameters back from the jobs' checkpoints.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tessera_ml.bench.harness import BenchHarness
from tessera_ml.comm.base import Communicator
from tessera_ml.report import MemoryReporter
from tessera_ml.worlds import entry_point, rank_context


@dataclass(frozen=True)
class Job:
    name: str
    algorithm: str
    assignments: list[dict[str, Any]]
    config: dict[str, Any]
    checkpoint_dir: str | None = None
    resume_from: str | None = None
    stop: tuple[int, int] | None = None
    """``(rank, step)``: that rank alone is asked to stop once it has reported ``step``."""
    speeds: tuple[float, ...] | None = None
    """Per rank, the speed its harness paces its device work to (``BenchHarness.speed``)."""


@dataclass
class JobOutcome:
    result: dict[str, Any]
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)


def run_jobs(comm: Communicator, jobs: list[Job]) -> dict[str, JobOutcome]:
    """On every rank of a world: run ``jobs`` in order; outcomes by job name."""
    outcomes = {}
    for job in jobs:
        comm.stats.reset()
        reporter = MemoryReporter()
        stop = threading.Event()
        if job.stop is not None and job.stop[0] == comm.rank:
            stop = _StopAfter(reporter, job.stop[1])
        ctx = rank_context(
            comm,
            job.algorithm,
            job.assignments,
            job.config,
            reporter=reporter,
            stop=stop,
            checkpoint_dir=job.checkpoint_dir,
            resume_from=job.resume_from,
            harness=BenchHarness(speed=job.speeds[comm.rank] if job.speeds else 1.0),
        )
        result = entry_point(job.algorithm)(ctx)
        series: dict[str, list[tuple[int, float]]] = {}
        for point in reporter.points:
            series.setdefault(point.name, []).append((point.step, point.value))
        outcomes[job.name] = JobOutcome(result, series)
        comm.barrier()
    return outcomes


class _StopAfter(threading.Event):
    def __init__(self, reporter: MemoryReporter, step: int) -> None:
        super().__init__()
        self._reporter = reporter
        self._step = step

    def is_set(self) -> bool:
        done = self._reporter.last_progress
        return done is not None and done[0] >= self._step


def ddp_params(folder: Path) -> torch.Tensor:
    """Flat parameters of a ddp checkpoint, last layer first (the layout hier_sync uses)."""
    state = torch.load(folder / "rank-0.pt", weights_only=False)
    tensors = list(state["model"].values())
    return torch.cat([t.reshape(-1) for t in reversed(tensors)])


def hier_params(folder: Path, node_ranks: list[int]) -> torch.Tensor:
    """Flat parameters assembled from the slices the devices of one node saved."""
    slices = [torch.load(folder / f"rank-{r}.pt", weights_only=False)["slice"] for r in node_ranks]
    bounds = slices[0]["bounds"]
    flat = torch.full((bounds[-1][-1],), float("nan"))
    for saved in slices:
        d = saved["number"]
        for b, piece in zip(bounds, saved["pieces"], strict=True):
            flat[b[d] : b[d + 1]] = piece
    return flat
