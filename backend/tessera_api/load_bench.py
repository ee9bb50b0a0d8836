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
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import httpx

from tessera_api.db import make_engine, make_session_factory, scratch_postgres
from tessera_api.load_seed import Seeded, seed
from tessera_api.load_traffic import (
    DASHBOARD_MIX,
    INGEST,
    Outcome,
    Ranks,
    Traffic,
    dashboard_calls,
    schedule,
    summary,
)

ADMIN_TOKEN = "load-bench-admin-token-0123456789"
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
TARGET_P99_MS = 50.0
TARGET_RATE = 200.0
TARGET_INGEST_POINTS_PER_S = 20_000.0


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
    return args


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Replicas:
    """``tessera api`` processes on one database, each on its own port."""

    def __init__(self, count: int, database_url: str, home: Path, workers: int = 1) -> None:
        self.ports = [free_port() for _ in range(count)]
        self.home = home
        self.procs: list[subprocess.Popen[bytes]] = []
        env = {
            **os.environ,
            "TESSERA_HOME": str(home),
            "TESSERA_DATABASE_URL": database_url,
            "TESSERA_ADMIN_TOKEN": ADMIN_TOKEN,
        }
        for i, port in enumerate(self.ports):
            argv = [sys.executable, "-m", "tessera_api.cli", "api", "--port", str(port)]
            argv.append("--no-scheduler")
            if workers > 1:
                argv += ["--workers", str(workers)]
            # one migrates; the others skip what would be a race to the same upgrade
            if i > 0:
                argv.append("--no-migrate")
            with self.log(i).open("ab") as log:
                self.procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=log))
            self.wait_serving(i)

    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    @property
    def bases(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.ports]

    def log(self, index: int) -> Path:
        return self.home / f"api-{index}.log"

    def wait_serving(self, index: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        url = f"{self.bases[index]}/api/v1/health"
        while True:
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.procs[index].poll() is not None or time.monotonic() > deadline:
                tail = self.log(index).read_text(errors="replace")[-3000:]
                self.stop()
                raise RuntimeError(f"tessera api did not come up:\n{tail}")
            time.sleep(0.1)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def mix_report(outcome: Outcome, *, rate: float, ingest_rate: float) -> dict[str, Any]:
    elapsed = max(outcome.ended - outcome.started, 1e-9)
    dashboard = [name for name, _ in DASHBOARD_MIX]
    everything = [*dashboard, INGEST]
    return {
        "offered_rps": round(rate + ingest_rate, 1),
        "achieved_rps": round(outcome.ok() / elapsed, 1),
        "dashboard": {
            "offered_rps": round(rate, 1),
            "achieved_rps": round(outcome.ok(dashboard) / elapsed, 1),
            "requests": outcome.ok(dashboard) + outcome.failed(dashboard),
            "errors": outcome.failed(dashboard),
            **summary([v for name in dashboard for v in outcome.latencies.get(name, [])]),
        },
        "routes": {
            name: {
                "requests": len(outcome.latencies.get(name, [])) + outcome.failed([name]),
                "errors": dict(outcome.errors.get(name, {})),
                **summary(outcome.latencies.get(name, [])),
            }
            for name in everything
        },
        "ingest_offered_batches_per_s": round(ingest_rate, 1),
        "ingest_points_per_s": round(outcome.points / elapsed),
        "seconds": round(elapsed, 2),
    }


def ingest_report(outcome: Outcome, *, ranks: int, batch_points: int) -> dict[str, Any]:
    elapsed = max(outcome.ended - outcome.started, 1e-9)
    latencies = outcome.latencies.get(INGEST, [])
    return {
        "ranks": ranks,
        "batch_points": batch_points,
        "batches": len(latencies),
        "errors": dict(outcome.errors.get(INGEST, {})),
        "points_per_s": round(outcome.points / elapsed),
        "batches_per_s": round(len(latencies) / elapsed, 1),
        **summary(latencies),
        "seconds": round(elapsed, 2),
    }


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


class CpuUse:
    """The CPU the servers and this process used over a phase, in cores (Linux only; elsewhere
    the report is empty): it shows which side ran out of CPU."""

    def __init__(self, servers: Sequence[int]) -> None:
        self.servers = list(servers)
        self.start: tuple[float, float, float] | None = None
        self.used: tuple[float, float, float] | None = None

    def __enter__(self) -> CpuUse:
        self.start = self._now()
        return self

    def __exit__(self, *_: object) -> None:
        end = self._now()
        if self.start is not None and end is not None:
            self.used = (end[0] - self.start[0], end[1] - self.start[1], end[2] - self.start[2])

    def _now(self) -> tuple[float, float, float] | None:
        try:
            servers = sum(_cpu_seconds(pid) for pid in self.servers)
        except OSError:
            return None
        mine = time.process_time()
        return time.monotonic(), servers, mine

    def report(self) -> dict[str, Any]:
        if self.used is None or self.used[0] <= 0:
            return {}
        wall, servers, mine = self.used
        return {
            "cpu_cores": {
                "servers": round(servers / wall, 2),
                "generator": round(mine / wall, 2),
                "machine": os.cpu_count(),
            }
        }


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process and of its children (a server's workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(entry.name) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / ticks
    if total == 0.0 and not Path(f"/proc/{pid}").exists():
        raise OSError(f"no process {pid}")
    return total


def progress(run: dict[str, Any]) -> str:
    """One line per run, as it finishes."""
    dashboard, ingest = run["mix"]["dashboard"], run["ingest"]
    return (
        f"tessera bench api: {run['database']} x{run['replicas']}: "
        f"{dashboard['achieved_rps']}/{dashboard['offered_rps']} requests/s, "
        f"p50 {dashboard['p50_ms']} ms, p99 {dashboard['p99_ms']} ms, "
        f"{dashboard['errors']} errors; ingest {ingest['points_per_s']} points/s"
    )


def run_loop(main: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """Run the generator on uvloop when it is installed (it comes with uvicorn's extras): the
    generator shares the machine with the servers, so the less it spends the better."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)


def targets(run: dict[str, Any], rate: float) -> dict[str, bool | None]:
    """Whether a run meets the targets; None where the run does not measure that target."""
    one_at_target = run["replicas"] == 1 and run["workers_per_replica"] == 1 and rate >= TARGET_RATE
    p99 = run["mix"]["dashboard"]["p99_ms"]
    errors = run["mix"]["dashboard"]["errors"]
    return {
        "dashboard_p99_le_50ms_at_200rps_one_replica": (
            p99 <= TARGET_P99_MS and errors == 0 if one_at_target else None
        ),
        "ingest_ge_20000_points_per_s": (
            run["ingest"]["points_per_s"] >= TARGET_INGEST_POINTS_PER_S
        ),
    }


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
    if args.json_out is not None:
        args.json_out.write_text(out + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
