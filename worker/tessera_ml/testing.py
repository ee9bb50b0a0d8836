"""Run a function on every rank of a real gloo world of local processes.

Used by tests and benchmarks: ``run_world(fn, 4, arg)`` starts four processes, joins them in one
``torch.distributed`` world over a TCPStore on loopback, calls ``fn(comm, arg)`` on each and
returns the per-rank results in rank order. A rank that raises fails the whole call with its
traceback; every process is gone when the call returns.
"""

from __future__ import annotations

import os
import queue
import socket
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import torch.multiprocessing as mp

from tessera_ml.comm.base import Communicator


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


__all__ = ["Communicator", "WorldError", "free_port", "run_world"]
