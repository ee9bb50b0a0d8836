"""The mesh communicator's operations: messages and collectives routed by party.

A message between two ranks of one party goes through the party's ``torch.distributed`` world,
one between parties through the TLS link that joins them. A collective over a group inside this
rank's party runs on the party's world; over a group that spans parties it runs as a ring of
point-to-point messages, tagged with the group's link tag. ``tessera_ml.comm.mesh`` describes
the whole mesh; ``connect_mesh`` builds this communicator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from tessera_ml.comm import codec
from tessera_ml.comm.base import (
    MAX_DATA_BYTES,
    ByteStats,
    Communicator,
    Group,
    ReduceOp,
    Work,
    as_tensor,
    check_announced,
    nbytes,
)
from tessera_ml.comm.links import Done, InLink, LinkError, OutLink
from tessera_ml.comm.mesh_buffers import Kept, Staged, byte_view, host_bytes
from tessera_ml.comm.mesh_groups import ForeignGroup, LocalGroup, SpanningGroup, group_tag, ring_tag
from tessera_ml.comm.torch_dist import all_gather_into
from tessera_ml.security.tls import TlsConfig

P2P_TAG = 0
_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


PAIR_EXCHANGE_MAX = 1 << 20
"""Two ranks all-reduce tensors up to this size in one exchange (larger ones: the ring, which
needs a staging buffer of half the size)."""


class MeshCommunicator(Communicator):
    """A platform job's communicator (see ``tessera_ml.comm.mesh``); built by ``connect_mesh``."""

    def __init__(
        self,
        *,
        rank: int,
        parties: Sequence[str],
        backend: str,
        device: torch.device,
        tls: TlsConfig | None,
    ) -> None:
        self.rank = rank
        self.world_size = len(parties)
        self.parties = tuple(parties)
        self.party = parties[rank]
        self.members = tuple(r for r, p in enumerate(parties) if p == self.party)
        self.local_rank = {r: i for i, r in enumerate(self.members)}
        self.backend = backend
        self.device = device
        self.tls = tls
        self.address: str | None = None
        """Where this rank accepts links from other parties (``connect_mesh``'s ``address``)."""
        self.stats = ByteStats()
        self.out: dict[int, OutLink] = {}
        self.into: dict[int, InLink] = {}
        self.tap: Callable[[int, memoryview], None] | None = None
        """Sees the plaintext of every message to another party just before it is encrypted
        (tests check that none of it appears on the wire)."""
        self._world = self._group_of(tuple(range(self.world_size)), "world", handle=None)

    # -- groups ----------------------------------------------------------------------------
    @property
    def world(self) -> Group:
        return self._world

    def _group_of(self, ranks: tuple[int, ...], name: str, handle: Any) -> Group:
        owners = {self.parties[r] for r in ranks}
        if len(owners) > 1:
            return Group(name, ranks, SpanningGroup(group_tag(name)))
        if owners == {self.party}:
            return Group(name, ranks, LocalGroup(handle))
        return Group(name, ranks, ForeignGroup())

    def new_group(self, ranks: Sequence[int], name: str) -> Group:
        ranks = tuple(int(r) for r in ranks)
        owners = {self.parties[r] for r in ranks}
        handle = None
        if owners == {self.party} and len(self.members) > 1:
            # every rank of the party calls this, in the same order: the process group's rule
            handle = dist.new_group([self.local_rank[r] for r in ranks])
        return self._group_of(ranks, name, handle)

    def _resolve(self, group: Group | None) -> Group:
        return self._world if group is None else group

    def is_local(self, peer: int) -> bool:
        return self.parties[peer] == self.party

    def party_of(self, rank: int) -> str:
        return self.parties[rank]

    # -- point-to-point --------------------------------------------------------------------
    def send(self, tensor: torch.Tensor, dst: int) -> None:
        self._isend(tensor, dst, P2P_TAG, wait=True)
        self.stats.add_p2p(dst, sent=nbytes(tensor))

    def recv(self, tensor: torch.Tensor, src: int) -> None:
        self._irecv(tensor, src, P2P_TAG, wait=True)
        self.stats.add_p2p(src, received=nbytes(tensor))

    def isend(self, tensor: torch.Tensor, dst: int) -> Work:
        work = self._isend(tensor, dst, P2P_TAG, wait=False)
        self.stats.add_p2p(dst, sent=nbytes(tensor))
        return work

    def irecv(self, tensor: torch.Tensor, src: int) -> Work:
        work = self._irecv(tensor, src, P2P_TAG, wait=False)
        self.stats.add_p2p(src, received=nbytes(tensor))
        return work

    def _isend(self, tensor: torch.Tensor, dst: int, tag: int, *, wait: bool) -> Work:
        if self.is_local(dst):
            peer = self.local_rank[dst]
            if wait:
                dist.send(tensor.contiguous(), peer, tag=tag)
                return Done()
            return Kept(dist.isend(tensor.contiguous(), peer, tag=tag), tensor)
        host = host_bytes(tensor)
        link = self._out(dst)
        if self.tap is not None:
            self.tap(dst, host)
        if wait:
            link.send(tag, host)
            return Done()
        return Kept(link.isend(tag, host), host)

    def _irecv(self, tensor: torch.Tensor, src: int, tag: int, *, wait: bool) -> Work:
        if self.is_local(src):
            peer = self.local_rank[src]
            if wait:
                dist.recv(tensor, peer, tag=tag)
                return Done()
            return Kept(dist.irecv(tensor, peer, tag=tag), tensor)
        link = self._in(src)
        if tensor.device.type == "cpu" and tensor.is_contiguous():
            view = byte_view(tensor)
            if wait:
                link.recv(tag, view)
                return Done()
            return Kept(link.irecv(tag, view), tensor)
        staging = torch.empty(tensor.shape, dtype=tensor.dtype)
        if wait:
            link.recv(tag, byte_view(staging))
            tensor.copy_(staging)
            return Done()
        return Staged(link.irecv(tag, byte_view(staging)), staging, tensor)

    def _out(self, peer: int) -> OutLink:
        link = self.out.get(peer)
        if link is None:
            raise LinkError(f"rank {self.rank} has no link to rank {peer}")
        return link

    def _in(self, peer: int) -> InLink:
        link = self.into.get(peer)
        if link is None:
            raise LinkError(f"rank {self.rank} has no link from rank {peer}")
        return link

    # -- collectives -----------------------------------------------------------------------
    def all_reduce(
        self, tensor: torch.Tensor, op: ReduceOp = "sum", group: Group | None = None
    ) -> None:
        g = self._resolve(group)
        kind = g.handle
        if g.size > 1:
            if isinstance(kind, LocalGroup):
                if op == "avg":
                    dist.all_reduce(tensor, dist.ReduceOp.SUM, group=kind.handle)
                else:
                    dist.all_reduce(tensor, _OPS[op], group=kind.handle)
            else:
                self._ring_all_reduce(tensor, "sum" if op == "avg" else op, g)
        if op == "avg":
            tensor.div_(g.size)
        moved = 2 * (g.size - 1) * nbytes(tensor) // max(g.size, 1)
        self.stats.add_group(g.name, sent=moved, received=moved)

    def all_gather(self, tensor: torch.Tensor, group: Group | None = None) -> list[torch.Tensor]:
        g = self._resolve(group)
        out = [torch.empty_like(tensor) for _ in range(g.size)]
        kind = g.handle
        if g.size == 1:
            out[0].copy_(tensor)
        elif isinstance(kind, LocalGroup):
            local = [self.local_rank[r] for r in g.ranks]
            all_gather_into(
                out, tensor.contiguous(), kind.handle, local, self.local_rank[self.rank]
            )
        else:
            self._ring_all_gather(tensor, out, g)
        moved = (g.size - 1) * nbytes(tensor)
        self.stats.add_group(g.name, sent=moved, received=moved)
        return out

    def broadcast(self, tensor: torch.Tensor, src: int, group: Group | None = None) -> None:
        g = self._resolve(group)
        kind = g.handle
        if g.size > 1:
            if isinstance(kind, LocalGroup):
                dist.broadcast(tensor, self.local_rank[src], group=kind.handle)
            elif self.rank == src:
                tag = ring_tag(kind)
                works = [self._isend(tensor, r, tag, wait=False) for r in g.ranks if r != src]
                for work in works:
                    work.wait()
            else:
                self._irecv(tensor, src, ring_tag(kind), wait=True)
        if self.rank == src:
            self.stats.add_group(g.name, sent=(g.size - 1) * nbytes(tensor))
        else:
            self.stats.add_group(g.name, received=nbytes(tensor))

    def barrier(self, group: Group | None = None) -> None:
        g = self._resolve(group)
        kind = g.handle
        if g.size == 1:
            return
        if isinstance(kind, LocalGroup):
            dist.barrier(group=kind.handle)
        else:
            self._ring_all_reduce(torch.zeros(1), "sum", g)

    def all_gather_data(self, obj: Any, group: Group | None = None) -> list[Any]:
        g = self._resolve(group)
        payload = as_tensor(codec.encode(obj))
        before = self.stats.snapshot()
        if payload.numel() > MAX_DATA_BYTES:
            raise ValueError(f"{payload.numel()} bytes of data exceed {MAX_DATA_BYTES}")
        lengths = self.all_gather(torch.tensor([payload.numel()], dtype=torch.int64), g)
        sizes = [int(n.item()) for n in lengths]
        check_announced(sizes, g.ranks)
        longest = max(sizes)
        padded = torch.zeros(longest, dtype=torch.uint8)
        padded[: payload.numel()] = payload
        gathered = self.all_gather(padded.to(self.device), g)
        self._restore_group(g.name, before)
        moved = (g.size - 1) * payload.numel()
        self.stats.add_group(g.name, sent=moved, received=moved)
        return [
            codec.decode(t.cpu()[: int(n.item())].numpy().tobytes())
            for t, n in zip(gathered, lengths, strict=True)
        ]

    def _restore_group(self, name: str, before: dict[str, Any]) -> None:
        with self.stats._lock:
            self.stats.group_sent[name] = before["group_sent"].get(name, 0)
            self.stats.group_recv[name] = before["group_recv"].get(name, 0)

    def _ring(self, g: Group) -> tuple[int, int, int, int]:
        n = g.size
        p = g.index(self.rank)
        return n, p, g.ranks[(p + 1) % n], g.ranks[(p - 1) % n]

    def _ring_all_reduce(self, tensor: torch.Tensor, op: str, g: Group) -> None:
        n, p, right, left = self._ring(g)
        tag = ring_tag(g.handle)
        flat = tensor.detach().reshape(-1).contiguous()
        if flat.device.type != "cpu":
            flat = flat.cpu()
        if n == 2 and nbytes(flat) <= PAIR_EXCHANGE_MAX:
            # the same bytes as the ring's two halves, in one exchange instead of two rounds;
            # both ranks combine in rank order, so they hold the same bits (-0.0 and +0.0 under
            # max, NaN payloads under sum)
            incoming = torch.empty_like(flat)
            work = self._isend(flat, right, tag, wait=False)
            self._irecv(incoming, left, tag, wait=True)
            work.wait()
            first, second = (flat, incoming) if p == 0 else (incoming, flat)
            _combine(first, second, flat, op)
        else:
            chunks = list(torch.tensor_split(flat, n))
            incoming = torch.empty_like(chunks[0]) if chunks else flat
            for s in range(n - 1):
                out_chunk = chunks[(p - s) % n]
                target = chunks[(p - s - 1) % n]
                buffer = incoming[: target.numel()]
                work = self._isend(out_chunk, right, tag, wait=False)
                self._irecv(buffer, left, tag, wait=True)
                work.wait()
                _combine(target, buffer, target, op)
            for s in range(n - 1):
                work = self._isend(chunks[(p + 1 - s) % n], right, tag, wait=False)
                self._irecv(chunks[(p - s) % n], left, tag, wait=True)
                work.wait()
        if flat.data_ptr() != tensor.data_ptr() or not tensor.is_contiguous():
            tensor.copy_(flat.view(tensor.shape))

    def _ring_all_gather(self, tensor: torch.Tensor, out: list[torch.Tensor], g: Group) -> None:
        n, p, right, left = self._ring(g)
        tag = ring_tag(g.handle)
        out[p].copy_(tensor)
        for s in range(n - 1):
            work = self._isend(out[(p - s) % n], right, tag, wait=False)
            self._irecv(out[(p - s - 1) % n], left, tag, wait=True)
            work.wait()

    def close(self) -> None:
        for out in self.out.values():
            out.close()
        for into in self.into.values():
            into.close()
        self.out.clear()
        self.into.clear()
        if dist.is_initialized():
            dist.destroy_process_group()


def _combine(first: torch.Tensor, second: torch.Tensor, out: torch.Tensor, op: str) -> None:
    """``out = op(first, second)``, in that order (``out`` may be either operand)."""
    if op == "sum":
        torch.add(first, second, out=out)
    elif op == "max":
        torch.maximum(first, second, out=out)
    else:
        torch.minimum(first, second, out=out)
