"""An in-process communicator: ranks are threads, messages go through mailboxes.

For fast protocol unit tests: the same ``Communicator`` interface and the same byte accounting
as ``TorchDistCommunicator``, without processes or sockets. ``run_local(fn, n, *args)`` runs
``fn(comm, *args)`` on ``n`` threads and returns the results by rank; a rank that raises breaks
every pending operation of the others, and the call re-raises the first error.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from tessera_ml.comm import codec
from tessera_ml.comm.base import ByteStats, Communicator, Group, ReduceOp, Work, nbytes


class LocalWorldBroken(RuntimeError):
    """Another rank of the in-process world failed, or an operation timed out."""


class _Done:
    def __init__(self, action: Callable[[], None] | None = None) -> None:
        self._action = action

    def wait(self) -> None:
        if self._action is not None:
            self._action()
            self._action = None


class _Meeting:
    """Where the members of one group meet for each collective, in call order."""

    def __init__(self, size: int, timeout_s: float) -> None:
        self.barrier = threading.Barrier(size, timeout=timeout_s)
        self.slots: list[Any] = [None] * size

    def exchange(self, index: int, value: Any) -> list[Any]:
        try:
            self.slots[index] = value
            self.barrier.wait()
            everyone = list(self.slots)
            self.barrier.wait()
        except threading.BrokenBarrierError as exc:
            raise LocalWorldBroken("a collective was abandoned by another rank") from exc
        return everyone


class LocalWorld:
    """Shared state of ``size`` in-process ranks."""

    def __init__(self, size: int, *, timeout_s: float = 60.0) -> None:
        if size < 1:
            raise ValueError(f"a world needs at least one rank, got {size}")
        self.size = size
        self.timeout_s = timeout_s
        self.failed = threading.Event()
        self._lock = threading.Lock()
        self._mailboxes: dict[tuple[int, int], queue.Queue[torch.Tensor]] = {}
        self._meetings: dict[tuple[str, tuple[int, ...]], _Meeting] = {}

    def mailbox(self, src: int, dst: int) -> queue.Queue[torch.Tensor]:
        with self._lock:
            return self._mailboxes.setdefault((src, dst), queue.Queue())

    def meeting(self, group: Group) -> _Meeting:
        with self._lock:
            key = (group.name, group.ranks)
            if key not in self._meetings:
                self._meetings[key] = _Meeting(group.size, self.timeout_s)
            return self._meetings[key]

    def break_all(self) -> None:
        self.failed.set()
        with self._lock:
            for m in self._meetings.values():
                m.barrier.abort()

    def communicators(self) -> list[LocalCommunicator]:
        return [LocalCommunicator(self, r) for r in range(self.size)]


_REDUCE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sum": lambda s: s.sum(0),
    "avg": lambda s: s.sum(0) / s.shape[0],
    "max": lambda s: s.max(0).values,
    "min": lambda s: s.min(0).values,
}


class LocalCommunicator(Communicator):
    """One rank of a ``LocalWorld``. Sends are buffered (they never block)."""

    def __init__(self, world: LocalWorld, rank: int) -> None:
        self._shared = world
        self.rank = rank
        self.world_size = world.size
        self.stats = ByteStats()
        self._world = Group("world", tuple(range(world.size)))

    @property
    def world(self) -> Group:
        return self._world

    def new_group(self, ranks: Sequence[int], name: str) -> Group:
        group = Group(name, tuple(int(r) for r in ranks))
        self._shared.meeting(group)
        return group

    def send(self, tensor: torch.Tensor, dst: int) -> None:
        self._check_peer(dst)
        self._shared.mailbox(self.rank, dst).put(tensor.detach().clone())
        self.stats.add_p2p(dst, sent=nbytes(tensor))

    def recv(self, tensor: torch.Tensor, src: int) -> None:
        self._check_peer(src)
        message = self._take(self._shared.mailbox(src, self.rank), src)
        if message.shape != tensor.shape or message.dtype != tensor.dtype:
            raise ValueError(
                f"rank {self.rank} expected {tuple(tensor.shape)} {tensor.dtype} from {src}, "
                f"got {tuple(message.shape)} {message.dtype}"
            )
        tensor.copy_(message)
        self.stats.add_p2p(src, received=nbytes(tensor))

    def isend(self, tensor: torch.Tensor, dst: int) -> Work:
        self.send(tensor, dst)
        return _Done()

    def irecv(self, tensor: torch.Tensor, src: int) -> Work:
        return _Done(lambda: self.recv(tensor, src))

    def all_reduce(
        self, tensor: torch.Tensor, op: ReduceOp = "sum", group: Group | None = None
    ) -> None:
        g = self._group(group)
        values = self._exchange(g, tensor.detach().clone())
        tensor.copy_(_REDUCE[op](torch.stack(values)).to(tensor.dtype))
        moved = 2 * (g.size - 1) * nbytes(tensor) // max(g.size, 1)
        self.stats.add_group(g.name, sent=moved, received=moved)

    def all_gather(self, tensor: torch.Tensor, group: Group | None = None) -> list[torch.Tensor]:
        g = self._group(group)
        values = self._exchange(g, tensor.detach().clone())
        moved = (g.size - 1) * nbytes(tensor)
        self.stats.add_group(g.name, sent=moved, received=moved)
        return [v.clone() for v in values]

    def broadcast(self, tensor: torch.Tensor, src: int, group: Group | None = None) -> None:
        g = self._group(group)
        values = self._exchange(g, tensor.detach().clone() if self.rank == src else None)
        tensor.copy_(values[g.index(src)])
        if self.rank == src:
            self.stats.add_group(g.name, sent=(g.size - 1) * nbytes(tensor))
        else:
            self.stats.add_group(g.name, received=nbytes(tensor))

    def barrier(self, group: Group | None = None) -> None:
        self._exchange(self._group(group), None)

    def all_gather_data(self, obj: Any, group: Group | None = None) -> list[Any]:
        g = self._group(group)
        payload = codec.encode(obj)
        values = self._exchange(g, payload)
        moved = (g.size - 1) * len(payload)
        self.stats.add_group(g.name, sent=moved, received=moved)
        return [codec.decode(v) for v in values]

    def _group(self, group: Group | None) -> Group:
        g = self._world if group is None else group
        if self.rank not in g.ranks:
            raise ValueError(f"rank {self.rank} is not a member of group {g.name!r}")
        return g

    def _exchange(self, group: Group, value: Any) -> list[Any]:
        if self._shared.failed.is_set():
            raise LocalWorldBroken("another rank failed")
        return self._shared.meeting(group).exchange(group.index(self.rank), value)

    def _take(self, box: queue.Queue[torch.Tensor], src: int) -> torch.Tensor:
        deadline = time.monotonic() + self._shared.timeout_s
        while True:
            if self._shared.failed.is_set():
                raise LocalWorldBroken(f"rank {self.rank} waited on {src}, and a rank failed")
            try:
                return box.get(timeout=0.05)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise LocalWorldBroken(
                        f"rank {self.rank} timed out waiting for a message from {src}"
                    ) from None

    def _check_peer(self, peer: int) -> None:
        if not 0 <= peer < self.world_size or peer == self.rank:
            raise ValueError(f"rank {self.rank} cannot exchange with rank {peer}")


def run_local(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout_s: float = 60.0,
    threads: int | None = 1,
) -> list[Any]:
    """Run ``fn(comm, *args)`` on ``world_size`` threads sharing one ``LocalWorld``.

    ``threads`` sets torch's intra-op threads for the duration (None: leave as is).
    """
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _run_threads(fn, world_size, args, timeout_s)
    finally:
        torch.set_num_threads(before)


def _run_threads(
    fn: Callable[..., Any], world_size: int, args: tuple[Any, ...], timeout_s: float
) -> list[Any]:
    world = LocalWorld(world_size, timeout_s=timeout_s)
    results: list[Any] = [None] * world_size
    errors: list[tuple[int, BaseException]] = []

    def main(comm: LocalCommunicator) -> None:
        try:
            results[comm.rank] = fn(comm, *args)
        except BaseException as exc:
            errors.append((comm.rank, exc))
            world.break_all()

    threads = [
        threading.Thread(target=main, args=(c,), name=f"rank-{c.rank}", daemon=True)
        for c in world.communicators()
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    if any(t.is_alive() for t in threads):
        world.break_all()
        raise LocalWorldBroken(f"in-process world of {world_size} timed out after {timeout_s}s")
    if errors:
        first = next((e for e in errors if not isinstance(e[1], LocalWorldBroken)), errors[0])
        raise first[1]
    return results
