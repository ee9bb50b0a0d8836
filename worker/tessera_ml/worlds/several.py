"""Jobs run one after another on the ranks of one world: starting processes costs more than
most test and benchmark jobs, so one world runs several. Each job is planned exactly as the
control plane plans it and run through its registered entry point."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from tessera_ml.comm.base import Communicator
from tessera_ml.context import StopSignal
from tessera_ml.harness import Harness
from tessera_ml.report import MemoryReporter
from tessera_ml.worlds.jobs import RankOutcome, entry_point, rank_context


@dataclass(frozen=True)
class WorldJob:
    algorithm: str
    assignments: list[dict[str, Any]]
    config: dict[str, Any]
    name: str = ""
    checkpoint_dir: str | None = None
    resume_from: str | None = None
    data_root: str | None = None
    stop: tuple[int, int] | None = None
    """``(rank, step)``: that rank alone is asked to stop once it has reported ``step`` (0: it
    is asked before the job starts)."""
    harnesses: tuple[Harness, ...] | None = None
    """One per rank: what each rank's context lends it to be measured with."""


def run_job(comm: Communicator, job: WorldJob, via: Communicator | None = None) -> RankOutcome:
    """This rank's part of ``job``; its context gets ``via`` (e.g. a recorder around ``comm``)
    where given."""
    reporter = MemoryReporter()
    ctx = rank_context(
        via if via is not None else comm,
        job.algorithm,
        job.assignments,
        job.config,
        reporter=reporter,
        stop=_stop_signal(job, comm.rank, reporter),
        checkpoint_dir=job.checkpoint_dir,
        resume_from=job.resume_from,
        data_root=job.data_root,
        harness=job.harnesses[comm.rank] if job.harnesses is not None else None,
    )
    before = comm.stats.snapshot()
    result = entry_point(job.algorithm)(ctx)
    after = comm.stats.snapshot()
    return RankOutcome(
        rank=comm.rank,
        role=ctx.role,
        party=ctx.party,
        result=result,
        points=list(reporter.points),
        lines=list(reporter.lines),
        checkpoints=list(reporter.checkpoints),
        artifacts=list(reporter.artifacts),
        sent_to={
            peer: sent - before["sent_to"].get(peer, 0)
            for peer, sent in after["sent_to"].items()
            if sent > before["sent_to"].get(peer, 0)
        },
        group_sent=sum(after["group_sent"].values()) - sum(before["group_sent"].values()),
    )


def run_jobs(comm: Communicator, jobs: list[WorldJob]) -> list[RankOutcome]:
    """On every rank of a world: ``jobs`` in order, byte counts reset before each, every rank
    done with one before the next starts."""
    outcomes = []
    for job in jobs:
        comm.stats.reset()
        outcomes.append(run_job(comm, job))
        comm.barrier()
    return outcomes


def _stop_signal(job: WorldJob, rank: int, reporter: MemoryReporter) -> StopSignal:
    if job.stop is None or job.stop[0] != rank:
        return threading.Event()
    if job.stop[1] == 0:
        stop = threading.Event()
        stop.set()
        return stop
    return _StopAfter(reporter, job.stop[1])


class _StopAfter(threading.Event):
    def __init__(self, reporter: MemoryReporter, step: int) -> None:
        super().__init__()
        self._reporter = reporter
        self._step = step

    def is_set(self) -> bool:
        done = self._reporter.last_progress
        return done is not None and done[0] >= self._step
