"""A node's CPU devices on one host: the phases inside the node through shared memory.

Each device's gradient buffer lives in a shared-memory file that the node's other devices map,
and the node's devices share one parameter buffer. A reduce-scatter is then a barrier and a
sum of the device's own piece read from its peers' buffers, and an all-gather is a barrier:
every device updates its piece of the one parameter buffer in place. A device reads and writes
only its own piece, so what it does shrinks with its slice, where the rings over the network
send and receive the whole bucket whatever the slice.

Set-up runs over the node's own point-to-point links (the names never leave the node): every
device creates a file under ``directory`` with a random name, device 0 also the parameter file;
the names go to device 0 and back to all; each device maps its peers' files; the node uses
shared memory only if every device could map every file, else it keeps the rings (devices on
different hosts see no common files, and a full ``/dev/shm`` refuses the space up front). The
files are removed once mapped, or when set-up fails, so nothing stays behind the job.

Barriers are empty messages to every other device of the node over the communicator, so a
peer that fails makes the others fail rather than wait.
"""

from __future__ import annotations

import mmap
import os
import re
import secrets
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from tessera_ml.algorithms.hier_sync.flat import FlatParams
from tessera_ml.comm.base import Communicator, Work

SHARED_MEMORY = Path("/dev/shm")
_NAME = re.compile(r"tessera-hier-[0-9a-f]{32}")


class SharedNode:
    """The node's devices' gradient buffers and their common parameter buffer, mapped."""

    def __init__(self, comm: Communicator, ranks: Sequence[int], grads: list[torch.Tensor]) -> None:
        self.comm = comm
        self.ranks = list(ranks)
        self.position = self.ranks.index(comm.rank)
        self.grads = grads
        """Every device's gradient buffer, by device number (this device's among them)."""
        self._token = torch.zeros(1, dtype=torch.uint8)
        self._tokens = [torch.zeros(1, dtype=torch.uint8) for _ in self.ranks]
        self._partial = torch.empty(0, dtype=grads[self.position].dtype)
        """Where the peers' pieces are summed with three or more devices; kept between steps."""

    @classmethod
    def connect(
        cls,
        comm: Communicator,
        ranks: Sequence[int],
        flat: FlatParams,
        pieces: Sequence[tuple[int, int]],
        directory: Path = SHARED_MEMORY,
    ) -> SharedNode | None:
        """Move ``flat``'s buffers into shared memory; ``None`` (buffers untouched) where the
        node's devices cannot all map each other's files. Collective over ``ranks``.

        ``pieces`` are this device's ranges of the parameters: the values it brings to the
        common parameter buffer (each device brings its own, as an all-gather would).
        """
        position = list(ranks).index(comm.rank)
        nbytes = flat.nbytes
        own = _create(directory, nbytes)
        param = _create(directory, nbytes) if position == 0 else None
        try:
            names = _share_names(comm, ranks, own, param)
            mapped: list[mmap.mmap] | None = None
            if names is not None:
                grad_names, param_name = names
                mapped = _map_all(directory, [*grad_names, param_name], nbytes)
            agreed = _agree(comm, ranks, mapped is not None)
        finally:
            for created in (own, param):
                if created is not None:
                    (directory / created).unlink(missing_ok=True)
        if not agreed or mapped is None:
            return None
        tensors = [torch.frombuffer(m, dtype=flat.param.dtype, count=flat.numel) for m in mapped]
        shared_param = tensors[-1]
        with torch.no_grad():
            for start, end in pieces:
                shared_param[start:end].copy_(flat.param[start:end])
        flat.rebind(shared_param, tensors[position])
        return cls(comm, ranks, tensors[:-1])

    def reduce_scatter(self, bounds: Sequence[int]) -> None:
        """Once every device's bucket is ready: this device's piece summed over the node, in
        the ring's order (bit for bit the sum ``ring.reduce_scatter`` makes)."""
        self.barrier()
        n = len(self.ranks)
        p = self.position
        start, end = bounds[p], bounds[p + 1]
        if end == start:
            return
        others = [self.grads[(p + j) % n][start:end] for j in range(1, n)]
        # one peer's piece is added as it is; several are summed apart first, in the ring's
        # order, so the result is the ring's bit for bit
        partial = others[0]
        if n > 2:
            partial = torch.add(others[0], others[1], out=self._scratch(end - start))
            for other in others[2:]:
                partial.add_(other)
        self.grads[p][start:end].add_(partial)

    def _scratch(self, numel: int) -> torch.Tensor:
        """``numel`` elements of the summing buffer, grown to the largest piece seen: a fresh
        buffer per bucket would cost an allocation and a copy of the first peer's piece."""
        if self._partial.numel() < numel:
            self._partial = torch.empty(numel, dtype=self._partial.dtype)
        return self._partial[:numel]

    def barrier(self) -> None:
        """Wait until every device of the node has reached the same barrier."""
        works: list[Work] = []
        for q, rank in enumerate(self.ranks):
            if q != self.position:
                works.append(self.comm.irecv(self._tokens[q], rank))
        for q, rank in enumerate(self.ranks):
            if q != self.position:
                works.append(self.comm.isend(self._token, rank))
        for work in works:
            work.wait()


def _create(directory: Path, nbytes: int) -> str | None:
    """The name of a new zero-filled file of ``nbytes`` under ``directory``, its space
    reserved; ``None`` if the directory cannot hold one.

    Reserving matters on tmpfs: a file that is only truncated to size takes its pages when
    first touched, and a page that does not fit then kills the process (SIGBUS) instead of
    letting the node keep its rings."""
    name = f"tessera-hier-{secrets.token_hex(16)}"
    try:
        fd = os.open(directory / name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    try:
        os.posix_fallocate(fd, 0, nbytes)
        return name
    except OSError:
        (directory / name).unlink(missing_ok=True)
        return None
    finally:
        os.close(fd)


def _map_all(directory: Path, names: Sequence[str], nbytes: int) -> list[mmap.mmap] | None:
    mapped: list[mmap.mmap] = []
    for name in names:
        try:
            fd = os.open(directory / name, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                return None
            if info.st_size != nbytes:
                return None
            mapped.append(mmap.mmap(fd, nbytes))
        except OSError:
            return None
        finally:
            os.close(fd)
    return mapped


def _share_names(
    comm: Communicator,
    ranks: Sequence[int],
    own: str | None,
    param: str | None,
) -> tuple[list[str], str] | None:
    """Every device's file name and the parameter file's, as device 0 collected them."""

    def listing(collected: list[Any]) -> dict[str, Any] | None:
        names = [n for n in collected if isinstance(n, str) and _NAME.fullmatch(n)]
        complete = len(names) == len(ranks) and param is not None
        return {"grads": names, "param": param} if complete else None

    answer = _settle(comm, ranks, own, listing)
    if not isinstance(answer, dict):
        return None
    grads, param_name = answer.get("grads"), answer.get("param")
    if not isinstance(grads, list) or len(grads) != len(ranks) or not isinstance(param_name, str):
        return None
    if not all(isinstance(n, str) and _NAME.fullmatch(n) for n in [*grads, param_name]):
        return None
    return [str(n) for n in grads], param_name


def _agree(comm: Communicator, ranks: Sequence[int], ok: bool) -> bool:
    """True only if every device of the node says ``ok``; the same answer at every device."""
    return _settle(comm, ranks, ok, lambda oks: all(o is True for o in oks)) is True


def _settle(
    comm: Communicator, ranks: Sequence[int], mine: Any, decide: Callable[[list[Any]], Any]
) -> Any:
    """Device 0 collects every device's ``mine`` (plain data, in device order), ``decide``s,
    and hands every device the decision, which each returns."""
    leader = ranks[0]
    if comm.rank == leader:
        decision = decide([mine, *(comm.recv_data(r) for r in ranks[1:])])
        for rank in ranks[1:]:
            comm.send_data(decision, rank)
        return decision
    comm.send_data(mine, leader)
    return comm.recv_data(leader)
