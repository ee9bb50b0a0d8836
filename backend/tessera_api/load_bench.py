"""Measure the control plane's HTTP API under a fixed offered load.

``python -m tessera_api.load_bench`` (or ``tessera bench api``) starts ``tessera api`` as real
processes on SQLite and on PostgreSQL (a scratch database on ``--postgres-url``, dropped
afterwards), seeds parties, jobs and metric series through the services, then for one and for
two replicas (PostgreSQL only; requests go to them in turn):

1. **mix**: offers ``--rate`` dashboard requests per second, open loop (the jobs list, a job,
   its metric series downsampled to 1000 points each, its events with ``once=true``), plus
   ``--ingest-rate`` metric batches per second posted by ranks with their task credential;
2. **ingest**: ``--ingest-ranks`` ranks post ``--batch-points``-point batches back to back
   for ``--ingest-duration`` seconds: the ingest capacity in points per second.

It prints JSON (and writes it to ``--json-out``): offered requests per second and those answered
successfully, p50/p90/p99 latency per route, errors by route and status (``unfinished``: still
unanswered 30 s after the phase's last request was due), ingest points per second, and the CPU
the servers and the generator used (in cores). Latency counts from the moment a request was due,
so queueing shows. The generator runs in this process, on the same machine as the servers: its
own work competes with theirs for the CPU. The servers run with ``--no-scheduler``: the API is
measured, not job placement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import sys
import tempfile
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

from tessera_api.db import make_engine, make_session_factory, scratch_postgres
from tessera_api.load_replicas import ADMIN_TOKEN, CpuUse, Replicas
from tessera_api.load_report import (
    TARGET_INGEST_POINTS_PER_S,
    TARGET_P99_MS,
    TARGET_RATE,
    ingest_report,
    mix_report,
    progress,
    targets,
)
from tessera_api.load_seed import Seeded, seed
from tessera_api.load_traffic import DASHBOARD_MIX, Ranks, Traffic, dashboard_calls, schedule
from tessera_ml.output_file import unwritable, write_results

DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="tessera bench api",
        description="the control plane's HTTP API under a fixed offered load",
    )
    p.add_argument("--rate", type=float, default=200.0, help="dashboard requests/s offered")
    p.add_argument("--duration", type=float, default=20.0, help="seconds of the mix phase")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds offered before measuring")
    p.add_argument(
        "--replicas",
        type=int,
        nargs="+",
        default=[1, 2],
        help="replica counts to run (SQLite: 1 only)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes per replica (`tessera api --workers`; default: its default, 1)",
    )
    p.add_argument("--database", choices=["sqlite", "postgres", "both"], default="both")
    p.add_argument(
        "--postgres-url",
        default=os.environ.get("TESSERA_TEST_DATABASE_URL", DEFAULT_POSTGRES),
        help="a server where a scratch database may be created and dropped",
    )
    p.add_argument(
        "--ingest-rate", type=float, default=5.0, help="rank metric batches/s within the mix"
    )
    p.add_argument("--batch-points", type=int, default=500, help="points per metric batch")
    p.add_argument("--ingest-ranks", type=int, default=8, help="ranks of the ingest phase")
    p.add_argument(
        "--ingest-duration", type=float, default=None, help="seconds (default: --duration)"
    )
    p.add_argument("--jobs", type=int, default=500, help="jobs seeded")
    p.add_argument("--view-jobs", type=int, default=20, help="running jobs with metric series")
    p.add_argument(
        "--steps", type=int, default=200, help="points of each seeded series (4 metrics x 2 ranks)"
    )
    p.add_argument(
        "--connections", type=int, default=64, help="connections to each replica (open loop)"
    )
    p.add_argument("--json-out", type=Path, default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    positive = (args.rate, args.duration, args.ingest_ranks, args.view_jobs, args.steps)
    if min(positive) <= 0 or args.connections < 1:
        p.error("--rate, --duration, --ingest-ranks, --view-jobs, --steps, --connections > 0")
    if args.workers < 1:
        p.error("--workers must be at least 1")
    if args.batch_points < 1 or args.batch_points > 10_000:
        p.error("--batch-points must be within 1..10000")
    if min(args.replicas) < 1 or args.jobs < 1:
        p.error("--replicas and --jobs must be at least 1")
    problem = unwritable(args.json_out, "--json-out") if args.json_out is not None else None
    if problem is not None:
        p.error(problem)
    if args.database in ("postgres", "both"):
        problem = postgres_problem(args.postgres_url)
        if problem is not None:
            p.error(f"--postgres-url: {problem} (--database sqlite runs without PostgreSQL)")
    return args


def postgres_problem(url: str) -> str | None:
    """Why the PostgreSQL server at ``url`` cannot hold the scratch databases, or None: the
    server's own ``postgres`` database must answer, as ``scratch_postgres`` creates them
    from there."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

    try:
        engine = create_engine(make_url(url).set(database="postgres"))
    except (ArgumentError, NoSuchModuleError, ImportError, ValueError) as exc:
        return str(exc).strip().splitlines()[0]
    try:
        with engine.connect():
            pass
    except OperationalError as exc:
        return str(exc).strip().splitlines()[0]
    finally:
        engine.dispose()
    return None


async def drive(
    replicas: Replicas, seeded: Seeded, ranks: Ranks, args: argparse.Namespace
) -> dict[str, Any]:
    """Warm up, then the mix phase, then the ingest phase, against ``replicas``."""
    traffic = Traffic(replicas.bases, ranks, connections=args.connections)
    try:
        if args.warmup > 0:
            warm = dashboard_calls(seeded, ADMIN_TOKEN, int(args.rate * args.warmup), seed=1)
            await traffic.open_loop(schedule(warm, args.rate, ranks, args.ingest_rate, args.warmup))
        calls = dashboard_calls(seeded, ADMIN_TOKEN, int(args.rate * args.duration) + 1)
        with CpuUse(replicas.pids()) as mix_cpu:
            mix = await traffic.open_loop(
                schedule(calls, args.rate, ranks, args.ingest_rate, args.duration)
            )
        ingest_s = args.ingest_duration if args.ingest_duration is not None else args.duration
        with CpuUse(replicas.pids()) as ingest_cpu:
            ingest = await traffic.closed_loop(ingest_s)
    finally:
        await traffic.close()
    return {
        "mix": mix_report(mix, rate=args.rate, ingest_rate=args.ingest_rate) | mix_cpu.report(),
        "ingest": ingest_report(ingest, ranks=len(ranks.slots), batch_points=args.batch_points)
        | ingest_cpu.report(),
    }


def run_loop(main: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """Run the generator on uvloop when it is installed (it comes with uvicorn's extras): the
    generator shares the machine with the servers, so the less it spends the better."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def bench_database(
    kind: str, url: str, home: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    from tessera_api.migrate import upgrade
    from tessera_ml.registry import all_specs

    upgrade(url)
    engine = make_engine(url)
    started = time.perf_counter()
    seeded = seed(
        make_session_factory(engine),
        all_specs(),
        jobs_total=args.jobs,
        view_jobs=args.view_jobs,
        steps=args.steps,
        ingest_jobs=-(-args.ingest_ranks // 2),
    )
    seed_s = time.perf_counter() - started
    engine.dispose()
    ranks = Ranks(seeded.ranks[: args.ingest_ranks], args.batch_points)
    runs = []
    for count in sorted(set(args.replicas)):
        if kind == "sqlite" and count != 1:
            continue
        replicas = Replicas(count, url, home, args.workers)
        try:
            measured = run_loop(drive(replicas, seeded, ranks, args))
        finally:
            replicas.stop()
        run = {
            "database": kind,
            "replicas": count,
            "workers_per_replica": args.workers,
            "seeded": {
                "jobs": seeded.jobs,
                "view_jobs": len(seeded.view_jobs),
                "points": seeded.points,
                "seconds": round(seed_s, 1),
            },
            **measured,
        }
        run["targets_met"] = targets(run, args.rate)
        runs.append(run)
        print(progress(run), file=sys.stderr, flush=True)
    return runs


def run(args: argparse.Namespace) -> dict[str, Any]:
    kinds = ["sqlite", "postgres"] if args.database == "both" else [args.database]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tessera-load-") as tmp:
        for kind in kinds:
            home = Path(tmp) / kind
            home.mkdir()
            if kind == "sqlite":
                runs += bench_database(kind, f"sqlite:///{home / 'tessera.db'}", home, args)
            else:
                with scratch_postgres(args.postgres_url, prefix="tessera_bench") as url:
                    runs += bench_database(kind, url, home, args)
    return {
        "command": "tessera bench api "
        + " ".join(sys.argv[1:] if args.argv is None else args.argv),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(terse=True),
        },
        "load": {
            "rate": args.rate,
            "workers_per_replica": args.workers,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "mix": dict(DASHBOARD_MIX),
            "ingest_rate": args.ingest_rate,
            "batch_points": args.batch_points,
            "ingest_ranks": args.ingest_ranks,
            "open_loop": True,
            "scheduler": False,
        },
        "targets": {
            "dashboard_p99_ms": TARGET_P99_MS,
            "at_rps_one_replica": TARGET_RATE,
            "ingest_points_per_s": TARGET_INGEST_POINTS_PER_S,
        },
        "runs": runs,
    }


def _stop(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: replicas stopped, scratch database dropped


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    args.argv = None if argv is None else list(argv)
    signal.signal(signal.SIGTERM, _stop)
    report = run(args)
    out = json.dumps(report, indent=2)
    print(out)
    if args.json_out is not None and not write_results(args.json_out, out + "\n", "--json-out"):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
