"""Seed a database for the load benchmark through the services, as the API would fill it.

Parties with tokens, a worker per party, and two-party ``ddp`` jobs in every state the
dashboard shows: pending, queued, running with metric series, succeeded. Some running jobs are
left for the benchmark's ranks to report into: their tasks get a reporting credential, stored
hashed as ``POST /tasks/{id}/credentials`` would store it (that route also needs the worker's
signed certificate request, which is not what is measured here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy.orm import Session, sessionmaker

from tessera_api.dispatch import QueueDispatcher
from tessera_api.models import Party, Task
from tessera_api.schemas import JobCreate, MetricPointIn, PartyCreate, WorkerRegister
from tessera_api.security import Caller, hash_token, new_task_token
from tessera_api.services import jobs, lifecycle, parties, telemetry, workers
from tessera_api.states import TaskStatus
from tessera_ml.spec import AlgorithmSpec

PARTIES = ("alice", "bob", "carol")
METRICS = ("loss", "accuracy", "lr", "grad_norm")
SEED_BATCH = 500
"""Points per seeded ingest call: what a rank's reporter posts at most at once."""


@dataclass(frozen=True)
class RankSlot:
    """Where one benchmark rank reports: its job, task, global rank and the task's token."""

    job_id: str
    task_id: str
    rank: int
    token: str


@dataclass
class Seeded:
    tokens: dict[str, str] = field(default_factory=dict)
    """Party name -> party token."""
    view_jobs: list[str] = field(default_factory=list)
    """Jobs with metric series and events, read by the dashboard's detail, metrics and events."""
    view_parties: dict[str, tuple[str, str]] = field(default_factory=dict)
    """View job -> its two parties."""
    jobs: int = 0
    points: int = 0
    ranks: list[RankSlot] = field(default_factory=list)


def seed(
    factory: sessionmaker[Session],
    specs: Mapping[str, AlgorithmSpec],
    *,
    jobs_total: int,
    view_jobs: int,
    steps: int,
    ingest_jobs: int,
) -> Seeded:
    """``jobs_total`` jobs in all; ``view_jobs`` of them running with ``steps`` steps of each
    metric per rank, ``ingest_jobs`` more running with live task credentials (two ranks each)."""
    out = Seeded()
    admin = Caller(party=None)
    dispatcher = QueueDispatcher()
    with factory() as session:
        made: dict[str, Party] = {}
        placed: dict[str, str] = {}
        for name in PARTIES:
            party, token = parties.create_party(session, party_in=PartyCreate(name=name))
            party.auto_approve_from = ["admin"]
            out.tokens[name] = token
            made[name] = party
            register = WorkerRegister(hostname=f"host-{name}", cpu_count=2, memory_bytes=2**33)
            placed[name] = workers.register_worker(session, party=party, worker_in=register).id
        session.commit()

        running = view_jobs + ingest_jobs
        for i in range(max(jobs_total, running)):
            pair = (PARTIES[i % 3], PARTIES[(i + 1) % 3])
            job_in = JobCreate.model_validate(
                {
                    "name": f"bench-{i:05d}",
                    "algorithm": "ddp",
                    "config": {"steps": max(steps, 1), "batch_size": 16},
                    "assignments": [{"party": p, "role": "trainer"} for p in pair],
                }
            )
            job, _ = jobs.create_job(
                session, job_in=job_in, caller=admin, specs=specs, idempotency_key=None
            )
            out.jobs += 1
            kind = i % 4 if i >= running else 2
            if kind == 0:  # stays pending: waiting for nobody, never submitted
                session.commit()
                continue
            dispatcher.submit(session, job_id=job.id)
            if kind == 1:  # queued
                session.commit()
                continue
            placements = [
                lifecycle.Placement(p, placed[p], [lifecycle.RankDevice(r, "cpu")])
                for r, p in enumerate(pair)
            ]
            attempt = lifecycle.start_attempt(session, job_id=job.id, placements=placements)
            tasks = sorted(attempt.tasks, key=lambda t: int(t.ranks[0]["rank"]))
            _report(session, tasks, TaskStatus.running, exit_code=None)
            if i < view_jobs:
                out.points += _metrics(session, job_id=job.id, tasks=tasks, steps=steps)
                out.view_jobs.append(job.id)
                out.view_parties[job.id] = pair
            elif i < running:
                for task in tasks:
                    token = new_task_token()
                    task.credential_hash = hash_token(token)
                    rank = int(task.ranks[0]["rank"])
                    out.ranks.append(RankSlot(job.id, task.id, rank, token))
            else:  # kind 3: finished
                _report(session, tasks, TaskStatus.succeeded, exit_code=0)
            session.commit()
    return out


def _metrics(session: Session, *, job_id: str, tasks: list[Task], steps: int) -> int:
    """``steps`` points of every metric for each task's rank, in reporter-sized batches."""
    count = 0
    for task in tasks:
        rank = int(task.ranks[0]["rank"])
        per_batch = max(1, SEED_BATCH // len(METRICS))
        for lo in range(0, steps, per_batch):
            batch = [
                MetricPointIn(rank=rank, name=name, step=s, value=metric_value(name, s, steps))
                for s in range(lo, min(steps, lo + per_batch))
                for name in METRICS
            ]
            telemetry.ingest_metrics(session, job_id=job_id, task=task, points=batch)
            count += len(batch)
    return count


def metric_value(name: str, step: int, steps: int) -> float:
    """A plausible curve per metric name."""
    x = step / max(steps, 1)
    if name == "loss":
        return 2.3 * math.exp(-3 * x) + 0.05
    if name == "accuracy":
        return 0.97 * (1 - math.exp(-4 * x))
    if name == "lr":
        return 0.05 * 0.5 * (1 + math.cos(math.pi * x))
    return 1.0 / (1 + step) + 0.1 * abs(math.sin(step))


def _report(session: Session, tasks: list[Task], status: TaskStatus, exit_code: int | None) -> None:
    for task in tasks:
        lifecycle.report_task_status(
            session, task=task, status=status, reason=None, exit_code=exit_code, rank=None
        )
