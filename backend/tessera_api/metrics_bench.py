"""Measure metric ingest and the downsampled query on a large series.

``python -m tessera_api.metrics_bench --points 1000000`` prints JSON: the time to ingest the
points through the ingest service, to answer a dashboard query (``max_points`` per series), and,
as the baseline in the same run, to read the whole series without downsampling.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tessera_api.db import make_engine, make_session_factory
from tessera_api.models import Base, MetricPoint, Task
from tessera_api.schemas import JobCreate, MetricPointIn, PartyCreate, WorkerRegister
from tessera_api.security import Caller
from tessera_api.services import jobs, lifecycle, parties, series, telemetry, workers
from tessera_ml.spec import AlgorithmConfig, AlgorithmSpec, RoleSpec

BATCH = 10_000
SPEC = AlgorithmSpec(
    name="bench",
    title="Bench",
    summary="metrics only",
    roles=(RoleSpec(name="trainer", min=1),),
    config_model=AlgorithmConfig,
    entry_point="none:none",
)


def running_task(session: Session, specs: Mapping[str, AlgorithmSpec]) -> Task:
    party, _ = parties.create_party(session, party_in=PartyCreate(name="bench"))
    worker = workers.register_worker(
        session,
        party=party,
        worker_in=WorkerRegister(hostname="bench", cpu_count=1, memory_bytes=1),
    )
    job_in = JobCreate.model_validate(
        {
            "name": "bench",
            "algorithm": "bench",
            "assignments": [{"party": "bench", "role": "trainer"}],
        }
    )
    job, _ = jobs.create_job(
        session, job_in=job_in, caller=Caller(party=None), specs=specs, idempotency_key=None
    )
    lifecycle.queue_job(session, job_id=job.id)
    placement = lifecycle.Placement("bench", worker.id, [lifecycle.RankDevice(0, "cpu")])
    attempt = lifecycle.start_attempt(session, job_id=job.id, placements=[placement])
    session.commit()
    return attempt.tasks[0]


def run(url: str, points: int, max_points: int) -> dict[str, Any]:
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    factory = make_session_factory(engine)
    with factory() as session:
        task = running_task(session, {"bench": SPEC})
        job_id, attempt_id = task.attempt.job_id, task.attempt_id
        start = time.perf_counter()
        for lo in range(0, points, BATCH):
            batch = [
                MetricPointIn(rank=0, name="loss", step=s, value=math.exp(-s / points))
                for s in range(lo, min(points, lo + BATCH))
            ]
            telemetry.ingest_metrics(session, job_id=job_id, task=task, points=batch)
            session.commit()
        ingest_s = time.perf_counter() - start
    with factory() as session:
        start = time.perf_counter()
        result = series.query_series(
            session,
            attempt_id=attempt_id,
            names=["loss"],
            rank=None,
            step_min=None,
            step_max=None,
            max_points=max_points,
            cache=None,  # the query itself is measured
        )
        query_s = time.perf_counter() - start
        start = time.perf_counter()
        raw = session.execute(
            select(MetricPoint.step, MetricPoint.value)
            .where(MetricPoint.attempt_id == attempt_id, MetricPoint.name == "loss")
            .order_by(MetricPoint.step)
        ).all()
        raw_s = time.perf_counter() - start
    engine.dispose()
    return {
        "backend": engine.dialect.name,
        "points": points,
        "max_points": max_points,
        "ingest_s": round(ingest_s, 3),
        "ingest_points_per_s": round(points / ingest_s),
        "downsampled_query_s": round(query_s, 3),
        "returned_points": len(json.loads(result[0])["points"]),
        "baseline_full_read_s": round(raw_s, 3),
        "baseline_points": len(raw),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tessera_api.metrics_bench")
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--max-points", type=int, default=1000)
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{tmp}/bench.db"
        print(json.dumps(run(url, args.points, args.max_points), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
