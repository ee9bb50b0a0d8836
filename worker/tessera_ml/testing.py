"""Run a function on every rank of a real gloo world of local processes.

Used by tests and benchmarks: ``run_world(fn, 4, arg)`` starts four processes, joins them in one
``torch.distributed`` world over a TCPStore on loopback, calls ``fn(comm, arg)`` on each and
returns the per-rank results in rank order. A rank that raises fails the whole call with its
traceback; every process is gone when the call returns.
"""

from __future__ import annotations

import importlib
import os
import queue
import socket
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch.multiprocessing as mp

from tessera_ml.comm.base import Communicator
from tessera_ml.report import MetricPoint


class WorldError(RuntimeError):
    """A rank of a test world failed or the world timed out."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _rank_main(
    rank: int,
    world_size: int,
    host: str,
    port: int,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    results: Any,
    threads: int,
    env: dict[str, str],
) -> None:
    os.environ.update(env)
    import torch
    import torch.distributed as dist

    from tessera_ml.comm.torch_dist import TorchDistCommunicator

    torch.set_num_threads(threads)
    try:
        store = dist.TCPStore(host, port, world_size, is_master=(rank == 0), timeout=_TIMEOUT)
        comm = TorchDistCommunicator.init(
            rank=rank, world_size=world_size, store=store, backend="gloo", timeout_s=120
        )
        try:
            out = fn(comm, *args)
        finally:
            comm.close()
        results.put((rank, True, out))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


_TIMEOUT = __import__("datetime").timedelta(seconds=60)


def run_world(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout_s: float = 240.0,
    threads: int | Sequence[int] = 1,
    host: str = "127.0.0.1",
    env: dict[str, str] | None = None,
) -> list[Any]:
    """Run ``fn(comm, *args)`` on ``world_size`` gloo ranks; return results by rank.

    ``fn`` and ``args`` must be picklable (a module-level function). ``threads`` sets
    ``torch.set_num_threads`` per rank (one value, or one per rank).
    """
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port(host)
    per_rank = [threads] * world_size if isinstance(threads, int) else list(threads)
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(r, world_size, host, port, fn, args, results, per_rank[r], env or {}),
            daemon=True,
        )
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    collected: dict[int, Any] = {}
    failures: list[str] = []
    try:
        while len(collected) + len(failures) < world_size:
            try:
                rank, ok, payload = results.get(timeout=timeout_s)
            except queue.Empty as exc:
                raise WorldError(f"world of {world_size} timed out after {timeout_s}s") from exc
            if ok:
                collected[rank] = payload
            else:
                failures.append(f"rank {rank} failed:\n{payload}")
                break
    finally:
        for p in procs:
            p.join(timeout=5 if not failures else 0.5)
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    if failures:
        raise WorldError("\n".join(failures))
    return [collected[r] for r in range(world_size)]


@dataclass
class RankOutcome:
    """What one rank of ``run_algorithm`` returned and reported."""

    rank: int
    role: str
    party: str
    result: Any
    points: list[MetricPoint]
    lines: list[tuple[str, str]]
    checkpoints: list[tuple[int, str, int, str]]

    def series(self, name: str) -> list[tuple[int, float]]:
        return [(p.step, p.value) for p in self.points if p.name == name]


def _algorithm_rank(
    comm: Communicator,
    name: str,
    assignments: list[dict[str, Any]],
    config: dict[str, Any],
    checkpoint_dir: str | None,
    resume_from: str | None,
) -> RankOutcome:
    from pathlib import Path

    from tessera_ml.context import RankContext
    from tessera_ml.registry import get_spec
    from tessera_ml.report import MemoryReporter
    from tessera_ml.spec import Assignment

    spec = get_spec(name)
    assert spec is not None, name
    cfg = spec.parse_config(config)
    plan = spec.make_plan([Assignment.model_validate(a) for a in assignments], cfg)
    reporter = MemoryReporter()
    ctx = RankContext(
        rank=comm.rank,
        world_size=comm.world_size,
        slot=plan[comm.rank],
        plan=plan,
        config=cfg,
        comm=comm,
        reporter=reporter,
        checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else None,
        resume_from=Path(resume_from) if resume_from else None,
    )
    module_name, func_name = spec.entry_point.split(":")
    entry = getattr(importlib.import_module(module_name), func_name)
    result = entry(ctx)
    return RankOutcome(
        rank=comm.rank,
        role=ctx.role,
        party=ctx.party,
        result=result,
        points=list(reporter.points),
        lines=list(reporter.lines),
        checkpoints=list(reporter.checkpoints),
    )


def run_algorithm(
    name: str,
    assignments: list[dict[str, Any]],
    config: dict[str, Any] | None = None,
    *,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
    timeout_s: float = 240.0,
    threads: int | Sequence[int] = 1,
) -> list[RankOutcome]:
    """Run a registered algorithm as the platform would, on a real local gloo world.

    Plans the ranks from ``assignments`` exactly like the control plane, gives each rank a
    ``RankContext`` with a ``MemoryReporter``, and returns every rank's outcome in rank order.
    """
    from tessera_ml.registry import get_spec
    from tessera_ml.spec import Assignment

    spec = get_spec(name)
    if spec is None:
        raise KeyError(f"no algorithm named {name!r}")
    cfg = spec.parse_config(config or {})
    plan = spec.make_plan([Assignment.model_validate(a) for a in assignments], cfg)
    outcomes: list[RankOutcome] = run_world(
        _algorithm_rank,
        len(plan),
        name,
        assignments,
        config or {},
        checkpoint_dir,
        resume_from,
        timeout_s=timeout_s,
        threads=threads,
    )
    return outcomes


__all__ = ["Communicator", "RankOutcome", "WorldError", "free_port", "run_algorithm", "run_world"]
