"""The communicator of a platform job: gloo or NCCL inside a party, TLS between parties.

PyTorch's gloo has no encryption, and NCCL is for one organisation's GPUs, so a job whose ranks
belong to several parties is wired as:

- the ranks of one party form their own ``torch.distributed`` world (gloo, or NCCL on GPUs),
  through the attempt's rendezvous store under the prefix ``party/<name>/``;
- every pair of ranks of different parties is joined by two TLS 1.3 connections (one per
  direction, ``links``), each end proving with its certificate the party the plan gives it and
  the attempt;
- point-to-point messages take the party's world or the link, whichever joins the two ranks;
- a collective over a group inside one party runs on that party's world; over a group that
  spans parties it runs as a ring of point-to-point messages (reduce-scatter then all-gather),
  on the links where the ring crosses parties.

A job of one party is exactly a ``torch.distributed`` world. Byte accounting is the one of
``Communicator``: exact tensor bytes per peer, ring-model bytes per group.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from tessera_ml.comm import codec
from tessera_ml.comm.base import ByteStats, Communicator, Group, ReduceOp, Work, as_tensor, nbytes
from tessera_ml.comm.links import Done, InLink, LinkError, OutLink
from tessera_ml.comm.torch_dist import comm_device
from tessera_ml.security.tls import PeerRefused, TlsConfig

P2P_TAG = 0
HELLO = struct.Struct("!I")
_OPS = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}


def group_tag(name: str) -> int:
    """The link tag of a group's collectives (never the point-to-point tag)."""
    return zlib.crc32(name.encode()) | 1


@dataclass(frozen=True)
class _Local:
    """A group inside this rank's party: a process group of the party's world."""

    handle: Any


@dataclass(frozen=True)
class _Spanning:
    """A group across parties: collectives as rings of point-to-point messages."""

    tag: int


@dataclass(frozen=True)
class _Elsewhere:
    """A group inside another party; this rank never uses it."""


class MeshCommunicator(Communicator):
    """See the module docstring. Build it with ``connect_mesh``."""

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
            return Group(name, ranks, _Spanning(group_tag(name)))
        if owners == {self.party}:
            return Group(name, ranks, _Local(handle))
        return Group(name, ranks, _Elsewhere())

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
            return _Kept(dist.isend(tensor.contiguous(), peer, tag=tag), tensor)
        host = _host_bytes(tensor)
        link = self._out(dst)
        if self.tap is not None:
            self.tap(dst, host)
        if wait:
            link.send(tag, host)
            return Done()
        return _Kept(link.isend(tag, host), host)

    def _irecv(self, tensor: torch.Tensor, src: int, tag: int, *, wait: bool) -> Work:
        if self.is_local(src):
            peer = self.local_rank[src]
            if wait:
                dist.recv(tensor, peer, tag=tag)
                return Done()
            return _Kept(dist.irecv(tensor, peer, tag=tag), tensor)
        link = self._in(src)
        if tensor.device.type == "cpu" and tensor.is_contiguous():
            view = _view(tensor)
            if wait:
                link.recv(tag, view)
                return Done()
            return _Kept(link.irecv(tag, view), tensor)
        staging = torch.empty(tensor.shape, dtype=tensor.dtype)
        if wait:
            link.recv(tag, _view(staging))
            tensor.copy_(staging)
            return Done()
        return _Staged(link.irecv(tag, _view(staging)), staging, tensor)

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
            if isinstance(kind, _Local):
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
        elif isinstance(kind, _Local):
            dist.all_gather(out, tensor.contiguous(), group=kind.handle)
        else:
            self._ring_all_gather(tensor, out, g)
        moved = (g.size - 1) * nbytes(tensor)
        self.stats.add_group(g.name, sent=moved, received=moved)
        return out

    def broadcast(self, tensor: torch.Tensor, src: int, group: Group | None = None) -> None:
        g = self._resolve(group)
        kind = g.handle
        if g.size > 1:
            if isinstance(kind, _Local):
                dist.broadcast(tensor, self.local_rank[src], group=kind.handle)
            elif self.rank == src:
                tag = _tag(kind)
                works = [self._isend(tensor, r, tag, wait=False) for r in g.ranks if r != src]
                for work in works:
                    work.wait()
            else:
                self._irecv(tensor, src, _tag(kind), wait=True)
        if self.rank == src:
            self.stats.add_group(g.name, sent=(g.size - 1) * nbytes(tensor))
        else:
            self.stats.add_group(g.name, received=nbytes(tensor))

    def barrier(self, group: Group | None = None) -> None:
        g = self._resolve(group)
        kind = g.handle
        if g.size == 1:
            return
        if isinstance(kind, _Local):
            dist.barrier(group=kind.handle)
        else:
            self._ring_all_reduce(torch.zeros(1), "sum", g)

    def all_gather_data(self, obj: Any, group: Group | None = None) -> list[Any]:
        g = self._resolve(group)
        payload = as_tensor(codec.encode(obj))
        before = self.stats.snapshot()
        lengths = self.all_gather(torch.tensor([payload.numel()], dtype=torch.int64), g)
        longest = int(max(int(n.item()) for n in lengths))
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
        tag = _tag(g.handle)
        flat = tensor.detach().reshape(-1).contiguous()
        if flat.device.type != "cpu":
            flat = flat.cpu()
        chunks = list(torch.tensor_split(flat, n))
        incoming = torch.empty_like(chunks[0]) if chunks else flat
        for s in range(n - 1):
            out_chunk = chunks[(p - s) % n]
            target = chunks[(p - s - 1) % n]
            buffer = incoming[: target.numel()]
            work = self._isend(out_chunk, right, tag, wait=False)
            self._irecv(buffer, left, tag, wait=True)
            work.wait()
            _combine(target, buffer, op)
        for s in range(n - 1):
            work = self._isend(chunks[(p + 1 - s) % n], right, tag, wait=False)
            self._irecv(chunks[(p - s) % n], left, tag, wait=True)
            work.wait()
        if flat.data_ptr() != tensor.data_ptr() or not tensor.is_contiguous():
            tensor.copy_(flat.view(tensor.shape))

    def _ring_all_gather(self, tensor: torch.Tensor, out: list[torch.Tensor], g: Group) -> None:
        n, p, right, left = self._ring(g)
        tag = _tag(g.handle)
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


def _tag(kind: Any) -> int:
    if not isinstance(kind, _Spanning):
        raise RuntimeError("this rank is not a member of the group")
    return kind.tag


def _combine(target: torch.Tensor, incoming: torch.Tensor, op: str) -> None:
    if op == "sum":
        target.add_(incoming)
    elif op == "max":
        torch.maximum(target, incoming, out=target)
    else:
        torch.minimum(target, incoming, out=target)


def _view(tensor: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU tensor, writable in place."""
    if tensor.numel() == 0:
        return memoryview(bytearray())
    raw: Any = tensor.reshape(-1).view(torch.uint8).numpy()
    return memoryview(raw).cast("B")


def _host_bytes(tensor: torch.Tensor) -> memoryview:
    host = tensor.detach()
    if host.device.type != "cpu":
        host = host.cpu()
    return _view(host.contiguous())


class _Kept:
    """A pending operation that keeps its buffer alive until it is waited for."""

    def __init__(self, work: Any, keep: Any) -> None:
        self._work = work
        self._keep = keep

    def wait(self) -> Any:
        return self._work.wait()


class _Staged:
    """A receive into a CPU staging buffer, copied to its device tensor on ``wait``."""

    def __init__(self, work: Any, staging: torch.Tensor, target: torch.Tensor) -> None:
        self._work = work
        self._staging = staging
        self._target = target

    def wait(self) -> None:
        self._work.wait()
        self._target.copy_(self._staging)


# -- building the mesh ---------------------------------------------------------------------


def connect_mesh(
    *,
    rank: int,
    parties: Sequence[str],
    store: dist.Store,
    address: str,
    tls: TlsConfig | None,
    backend: str = "gloo",
    device: torch.device | None = None,
    timeout_s: float = 300.0,
    collective_timeout_s: float = 300.0,
) -> MeshCommunicator:
    """This rank's communicator: its party's world joined, and its links to other parties.

    Every rank of the job calls this at once. ``address`` is where this rank accepts links
    from other parties (its worker's advertised address); ``tls`` may be None only when the
    job has a single party. ``timeout_s`` bounds meeting the others; ``collective_timeout_s``
    bounds any one operation afterwards (a peer that stops answering fails the rank).
    """
    device = comm_device(backend, device)
    mesh = MeshCommunicator(rank=rank, parties=parties, backend=backend, device=device, tls=tls)
    foreign = [r for r in range(len(parties)) if not mesh.is_local(r)]
    if foreign and tls is None:
        raise ValueError("a job of several parties needs TLS between them")
    if len(mesh.members) > 1:
        _join_party_world(mesh, store, backend, device, collective_timeout_s)
    if foreign:
        assert tls is not None
        _link_parties(mesh, foreign, store, address, tls, timeout_s)
        for sock in [o.sock for o in mesh.out.values()] + [i.sock for i in mesh.into.values()]:
            sock.settimeout(collective_timeout_s)
    return mesh


def _join_party_world(
    mesh: MeshCommunicator,
    store: dist.Store,
    backend: str,
    device: torch.device,
    timeout_s: float,
) -> None:
    kwargs: dict[str, Any] = {}
    if device.type == "cuda":
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(
        backend=backend,
        store=dist.PrefixStore(f"party/{mesh.party}/", store),
        rank=mesh.local_rank[mesh.rank],
        world_size=len(mesh.members),
        timeout=timedelta(seconds=timeout_s),
        **kwargs,
    )
    if len(mesh.members) == mesh.world_size:
        mesh._world = Group("world", mesh._world.ranks, _Local(None))


def _link_parties(
    mesh: MeshCommunicator,
    foreign: list[int],
    store: dist.Store,
    address: str,
    tls: TlsConfig,
    timeout_s: float,
) -> None:
    """Accept a link from every rank of another party, and open one to each."""
    listener = socket.create_server((address, 0), backlog=64)
    arrived = threading.Condition()
    stop = threading.Event()

    def admit(sock: socket.socket) -> None:
        try:
            link = tls.accept(sock, timeout_s=min(timeout_s, 30.0))
            (peer,) = HELLO.unpack(_exact(link, HELLO.size))
            if peer not in foreign:
                raise PeerRefused(f"a peer claimed rank {peer}, which is not of another party")
            tls.expect(link, mesh.parties[peer])
        except (OSError, ssl.SSLError, PeerRefused, ConnectionError):
            sock.close()
            return
        with arrived:
            if peer in mesh.into:
                link.close()
                return
            mesh.into[peer] = InLink(link, peer)
            arrived.notify_all()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=admit, args=(sock,), daemon=True).start()

    acceptor = threading.Thread(target=accept_loop, name="mesh-accept", daemon=True)
    acceptor.start()
    try:
        host, port = listener.getsockname()[:2]
        store.set(f"mesh/{mesh.rank}", f"{host}:{port}")
        deadline = time.monotonic() + timeout_s
        for peer in foreign:
            where = store.get(f"mesh/{peer}").decode()
            peer_host, _, peer_port = where.rpartition(":")
            link = _dial(tls, (peer_host, int(peer_port)), mesh.parties[peer], deadline)
            link.sendall(HELLO.pack(mesh.rank))
            mesh.out[peer] = OutLink(link, peer)
        with arrived:
            while not set(foreign) <= set(mesh.into):
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(foreign) - set(mesh.into))
                    raise TimeoutError(f"ranks {missing} did not link to rank {mesh.rank}")
                arrived.wait(left)
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        listener.close()


def _dial(tls: TlsConfig, address: tuple[str, int], party: str, deadline: float) -> ssl.SSLSocket:
    while True:
        try:
            return tls.connect(address, party, timeout_s=30.0)
        except (ConnectionRefusedError, TimeoutError) as exc:
            if time.monotonic() > deadline:
                raise TimeoutError(f"cannot link to {address}: {exc}") from exc
            time.sleep(0.05)


def _exact(sock: ssl.SSLSocket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the peer closed the connection")
        data += chunk
    return data
