"""Run a function on every rank of a real gloo world of local processes.

Used by tests and benchmarks: ``run_world(fn, 4, arg)`` starts four processes, joins them in one
``torch.distributed`` world over a TCPStore on loopback, calls ``fn(comm, arg)`` on each and
returns the per-rank results in rank order. A rank that raises fails the whole call with its
traceback; every process is gone when the call returns.

With a network testbed (``tessera_ml.netns``), ``run_world(fn, 4, hosts=[0, 0, 1, 1],
testbed=testbed)`` places each rank in its host's namespace: ranks of one host talk over their
own address, ranks of different hosts over the rate-limited links.

Ranks are fresh interpreters (``spawn``), as a platform job's are. A test suite that starts
many worlds can call ``start_ranks_from_a_preloaded_server`` once: ranks are then forked
from a server process that imported torch (about two CPU-seconds an interpreter) only once.
"""

from __future__ import annotations

import os
import queue
import socket
import tempfile
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch.multiprocessing as mp

from tessera_ml.comm.base import Communicator
from tessera_ml.ports import free_port, port_of, reserve_port
from tessera_ml.security.pki import Credentials

if TYPE_CHECKING:
    from tessera_ml.netns import Testbed


class WorldError(RuntimeError):
    """A rank of a test world failed or the world timed out."""


_forked_from_server = False


def start_ranks_from_a_preloaded_server(modules: Sequence[str]) -> None:
    """Fork later worlds' ranks from one server process that has imported ``modules``.

    Each rank still gets this process's environment at the time of ``run_world`` and imports
    what its function needs beyond ``modules``; only the imports are shared. Benchmarks keep
    the default, fresh interpreters."""
    global _forked_from_server
    mp.set_forkserver_preload(list(modules))
    _forked_from_server = True


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
    netns: str | None = None,
    backend: str = "gloo",
    parties: PartyWorld | None = None,
    store_listener: socket.socket | None = None,
) -> None:
    if netns is not None:
        from tessera_ml.netns import enter_namespace

        enter_namespace(netns)
    # the caller's environment: a forked rank starts with its server's
    os.environ.clear()
    os.environ.update(env)
    import torch

    torch.set_num_threads(threads)
    try:
        device = None
        if backend == "nccl":
            device = torch.device("cuda", rank % torch.cuda.device_count())
        if parties is None:
            comm, close = _gloo_world(rank, world_size, host, port, backend, device, store_listener)
        else:
            comm, close = parties.join(rank, (host, port), backend, device, store_listener)
        try:
            out = fn(comm, *args)
        finally:
            close()
        results.put((rank, True, out))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


def _gloo_world(
    rank: int,
    world_size: int,
    host: str,
    port: int,
    backend: str,
    device: Any,
    listener: socket.socket | None,
) -> tuple[Communicator, Callable[[], None]]:
    """One ``torch.distributed`` world over a TCPStore: no parties, no TLS."""
    import torch.distributed as dist

    from tessera_ml.comm.torch_dist import TorchDistCommunicator

    store = dist.TCPStore(
        host,
        port,
        world_size,
        is_master=(rank == 0),
        timeout=_TIMEOUT,
        # the store's server takes the descriptor over and closes it
        master_listen_fd=listener.detach() if listener is not None else None,
    )
    comm = TorchDistCommunicator.init(
        rank=rank, world_size=world_size, store=store, backend=backend, timeout_s=120, device=device
    )
    return comm, comm.close


@dataclass
class PartyWorld:
    """A job's world as the platform wires it: each rank of its party, TLS between parties.

    Made by ``party_world`` with a throwaway certificate authority, so tests and benchmarks run
    the platform's communicator with certificates as real as a deployment's."""

    parties: tuple[str, ...]
    credentials: tuple[Credentials, ...]
    addresses: tuple[str, ...]
    attempt: str
    secret: bytes

    def join(
        self,
        rank: int,
        store: tuple[str, int],
        backend: str,
        device: Any,
        listener: socket.socket | None = None,
    ) -> tuple[Communicator, Callable[[], None]]:
        from tessera_ml.comm.world import join_world

        world = join_world(
            rank=rank,
            parties=self.parties,
            store_address=store,
            address=self.addresses[rank],
            credentials=self.credentials[rank],
            attempt=self.attempt,
            secret=self.secret,
            backend=backend,
            device=device,
            timeout_s=120,
            store_listener=listener,
        )
        return world.comm, world.close


def party_world(parties: Sequence[str], addresses: Sequence[str], folder: Path) -> PartyWorld:
    """Certificates for every rank of ``parties`` (one per rank) in ``folder``."""
    from tessera_ml.security.pki import Authority, Identity, issue_credentials

    authority = Authority.create("Tessera test CA")
    attempt = f"test-{uuid.uuid4().hex[:12]}"
    credentials = tuple(
        issue_credentials(authority, Identity(party, attempt), folder / f"rank-{rank}")
        for rank, party in enumerate(parties)
    )
    return PartyWorld(tuple(parties), credentials, tuple(addresses), attempt, os.urandom(32))


_TIMEOUT = timedelta(seconds=60)


def run_world(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout_s: float = 240.0,
    threads: int | Sequence[int] = 1,
    host: str = "127.0.0.1",
    env: dict[str, str] | None = None,
    hosts: Sequence[int] | None = None,
    testbed: Testbed | None = None,
    backend: str = "gloo",
    parties: Sequence[str] | None = None,
) -> list[Any]:
    """Run ``fn(comm, *args)`` on ``world_size`` ranks; return results by rank.

    ``fn`` and ``args`` must be picklable (a module-level function). ``threads`` sets
    ``torch.set_num_threads`` per rank (one value, or one per rank). With a started
    ``testbed``, ``hosts[r]`` is the simulated host of rank ``r`` (default: one rank per host).
    ``backend="nccl"`` puts rank ``r`` on GPU ``r % device_count`` (``comm.device``).
    Without ``parties`` the ranks form one gloo (or NCCL) world; with ``parties[r]``, the party
    of rank ``r``, they are wired as a platform job is (``PartyWorld``): TLS between parties.
    """
    ctx = mp.get_context("forkserver") if _forked_from_server else mp.get_context("spawn")
    results = ctx.Queue()
    per_rank = [threads] * world_size if isinstance(threads, int) else list(threads)
    namespaces: list[str | None] = [None] * world_size
    envs = [env or {} for _ in range(world_size)]
    addresses = [host] * world_size
    if parties is not None and len(parties) != world_size:
        raise ValueError(f"parties names {len(parties)} ranks, the world has {world_size}")
    if testbed is not None:
        placement = _placement(world_size, hosts, testbed)
        addresses = [testbed.address(h) for h in placement]
        host = testbed.address(placement[0])
        namespaces = [testbed.namespace(h) for h in placement]
        envs = [
            {
                "TORCH_CPP_LOG_LEVEL": "ERROR",  # no reverse DNS inside the namespaces
                **e,
                "GLOO_SOCKET_IFNAME": _testbed_interface(),
                "TESSERA_TESTBED_HOST": str(h),
            }
            for e, h in zip(envs, placement, strict=True)
        ]
    elif hosts is not None:
        raise ValueError("hosts place ranks on a testbed; pass testbed= as well")
    envs = [{**os.environ, **e} for e in envs]
    folder = tempfile.TemporaryDirectory(prefix="tessera-world-")
    wiring = None
    if parties is not None:
        wiring = party_world(parties, addresses, Path(folder.name))
    # rank 0 serves the store on a socket bound here, so no other socket takes the port before
    # it listens; in a testbed's namespace, whose address this process does not have and whose
    # ports only the world's ranks use, it binds a port number picked here itself
    listener = reserve_port(host) if testbed is None else None
    port = port_of(listener) if listener is not None else free_port()
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(
                r,
                world_size,
                host,
                port,
                fn,
                args,
                results,
                per_rank[r],
                envs[r],
                namespaces[r],
                backend,
                wiring,
                listener if r == 0 else None,
            ),
            daemon=True,
        )
        for r in range(world_size)
    ]
    try:
        for p in procs:
            p.start()
    finally:
        if listener is not None:
            listener.close()
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
        folder.cleanup()
    if failures:
        raise WorldError("\n".join(failures))
    return [collected[r] for r in range(world_size)]


def _placement(world_size: int, hosts: Sequence[int] | None, testbed: Testbed) -> list[int]:
    placement = list(range(world_size)) if hosts is None else [int(h) for h in hosts]
    if len(placement) != world_size:
        raise ValueError(f"hosts names {len(placement)} ranks, the world has {world_size}")
    bad = [h for h in placement if not 0 <= h < testbed.num_hosts]
    if bad:
        raise ValueError(f"hosts {bad} are not on a testbed of {testbed.num_hosts} hosts")
    return placement


def _testbed_interface() -> str:
    from tessera_ml.netns import INTERFACE

    return INTERFACE
