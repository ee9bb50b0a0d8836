"""Communicator over ``torch.distributed`` (gloo on CPU, NCCL on GPU)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from tessera_ml.comm import codec
from tessera_ml.comm.base import (
    ByteStats,
    Communicator,
    Group,
    ReduceOp,
    Work,
    as_tensor,
    check_announced,
    nbytes,
)

_OPS = {
    "sum": dist.ReduceOp.SUM,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
}


PAIR_TAG = 0x7E55
"""The tag of a two-member group's all-gather exchange, kept apart from the members' other
point-to-point messages."""


def all_gather_into(
    out: list[torch.Tensor], tensor: torch.Tensor, pg: Any, members: Sequence[int], me: int
) -> None:
    """All-gather ``tensor`` into ``out`` over the process group ``pg``, whose members are
    ``members`` (ranks of the default process group, in the group's order), ``me`` among them.

    Two members on gloo exchange their tensors directly. Gloo runs a collective on its own
    threads, and for two members handing the work to them and back costs more than the
    exchange itself. An 8-byte gather between two processes on a 2-core host: 177 µs through
    gloo's all-gather against 105 µs as one send and one receive each (median, loopback);
    658 to 906 µs against 397 to 488 µs over a 10 Mbit/s testbed link, where gloo's way also
    sent 750 link bytes per rank and the direct one 405.
    """
    if len(members) == 2 and _direct(out, tensor, pg):
        index = members.index(me)
        other = members[1 - index]
        out[index].copy_(tensor)
        sending = dist.isend(out[index], other, group=pg, tag=PAIR_TAG)
        dist.recv(out[1 - index], other, group=pg, tag=PAIR_TAG)
        if sending is not None:  # None only for a rank outside the group
            sending.wait()
        return
    dist.all_gather(out, tensor, group=pg)


def _direct(out: list[torch.Tensor], tensor: torch.Tensor, pg: Any) -> bool:
    return (
        tensor.device.type == "cpu"
        and all(t.is_contiguous() for t in out)
        and dist.get_backend(pg) == "gloo"
    )


def comm_device(backend: str, device: torch.device | None) -> torch.device:
    """The device collectives run on: the rank's GPU for NCCL, the CPU for gloo."""
    if backend != "nccl":
        return torch.device("cpu")
    if device is not None and device.type == "cuda":
        return device
    if not torch.cuda.is_available():
        raise RuntimeError("the NCCL backend needs a CUDA device, and none is visible")
    return torch.device("cuda", torch.cuda.current_device())


class _CountedWork:
    def __init__(self, work: Any) -> None:
        self._work = work

    def wait(self) -> Any:
        return self._work.wait()


class TorchDistCommunicator(Communicator):
    """Wraps the default process group, which the caller (launcher or test) initialised.

    Under NCCL every tensor must live on this rank's CUDA device (``self.device``); under gloo
    on the CPU.
    """

    def __init__(self, device: torch.device | None = None) -> None:
        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised")
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.stats = ByteStats()
        self._world = Group("world", tuple(range(self.world_size)), None)
        self.backend = str(dist.get_backend())
        self.device = comm_device(self.backend, device)

    @classmethod
    def init(
        cls,
        *,
        rank: int,
        world_size: int,
        store: dist.Store,
        backend: str = "gloo",
        timeout_s: float = 300.0,
        device: torch.device | None = None,
    ) -> TorchDistCommunicator:
        """Initialise the default process group from a rendezvous store and wrap it."""
        kwargs: dict[str, Any] = {}
        if backend == "nccl":
            device = comm_device(backend, device)
            torch.cuda.set_device(device)
        if device is not None and device.type == "cuda":
            kwargs["device_id"] = device
        dist.init_process_group(
            backend=backend,
            store=store,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
            **kwargs,
        )
        return cls(device)

    @property
    def world(self) -> Group:
        return self._world

    def new_group(self, ranks: Sequence[int], name: str) -> Group:
        ranks = tuple(int(r) for r in ranks)
        handle = dist.new_group(list(ranks))
        return Group(name, ranks, handle)

    def _pg(self, group: Group | None) -> Any:
        return None if group is None else group.handle

    def _group(self, group: Group | None) -> Group:
        return self._world if group is None else group

    def send(self, tensor: torch.Tensor, dst: int) -> None:
        dist.send(tensor.contiguous(), dst)
        self.stats.add_p2p(dst, sent=nbytes(tensor))

    def recv(self, tensor: torch.Tensor, src: int) -> None:
        dist.recv(tensor, src)
        self.stats.add_p2p(src, received=nbytes(tensor))

    def isend(self, tensor: torch.Tensor, dst: int) -> Work:
        work = dist.isend(tensor, dst)
        self.stats.add_p2p(dst, sent=nbytes(tensor))
        return _CountedWork(work)

    def irecv(self, tensor: torch.Tensor, src: int) -> Work:
        work = dist.irecv(tensor, src)
        self.stats.add_p2p(src, received=nbytes(tensor))
        return _CountedWork(work)

    def all_reduce(
        self, tensor: torch.Tensor, op: ReduceOp = "sum", group: Group | None = None
    ) -> None:
        g = self._group(group)
        if op == "avg":
            dist.all_reduce(tensor, dist.ReduceOp.SUM, group=self._pg(group))
            tensor.div_(g.size)
        else:
            dist.all_reduce(tensor, _OPS[op], group=self._pg(group))
        moved = 2 * (g.size - 1) * nbytes(tensor) // max(g.size, 1)
        self.stats.add_group(g.name, sent=moved, received=moved)

    def all_gather(self, tensor: torch.Tensor, group: Group | None = None) -> list[torch.Tensor]:
        g = self._group(group)
        out = [torch.empty_like(tensor) for _ in range(g.size)]
        all_gather_into(out, tensor.contiguous(), self._pg(group), g.ranks, self.rank)
        moved = (g.size - 1) * nbytes(tensor)
        self.stats.add_group(g.name, sent=moved, received=moved)
        return out

    def broadcast(self, tensor: torch.Tensor, src: int, group: Group | None = None) -> None:
        g = self._group(group)
        dist.broadcast(tensor, src, group=self._pg(group))
        if self.rank == src:
            self.stats.add_group(g.name, sent=(g.size - 1) * nbytes(tensor))
        else:
            self.stats.add_group(g.name, received=nbytes(tensor))

    def barrier(self, group: Group | None = None) -> None:
        dist.barrier(group=self._pg(group))

    def all_gather_data(self, obj: Any, group: Group | None = None) -> list[Any]:
        g = self._group(group)
        payload = codec.encode(obj)
        length = torch.tensor([len(payload)], dtype=torch.int64, device=self.device)
        lengths = [torch.empty_like(length) for _ in range(g.size)]
        all_gather_into(lengths, length, self._pg(group), g.ranks, self.rank)
        sizes = [int(t.item()) for t in lengths]
        check_announced(sizes, g.ranks)
        padded = torch.zeros(max(sizes), dtype=torch.uint8, device=self.device)
        padded[: len(payload)] = as_tensor(payload).to(self.device)
        gathered = [torch.empty_like(padded) for _ in range(g.size)]
        all_gather_into(gathered, padded, self._pg(group), g.ranks, self.rank)
        moved = (g.size - 1) * len(payload)
        self.stats.add_group(g.name, sent=moved, received=moved)
        return [
            codec.decode(t[:size].cpu().numpy().tobytes())
            for t, size in zip(gathered, sizes, strict=True)
        ]

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
