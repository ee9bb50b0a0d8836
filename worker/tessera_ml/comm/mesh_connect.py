"""Building the mesh: a rank joins its party's world and links to every rank of other parties.

Each rank listens on its advertised address and publishes where in the attempt's store
(``mesh/<rank>``). It dials every rank of another party over TLS, checking the certificate names
the party the plan gives that rank, then says which rank it is (``HELLO``). It accepts the same
from each of them, so every such pair ends up with one connection per direction.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from tessera_ml.comm.base import Group
from tessera_ml.comm.links import InLink, OutLink
from tessera_ml.comm.mesh_communicator import MeshCommunicator
from tessera_ml.comm.mesh_groups import LocalGroup
from tessera_ml.comm.torch_dist import comm_device
from tessera_ml.security.tls import PeerRefused, TlsConfig

HELLO = struct.Struct("!I")


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
    party_store: dist.Store | None = None,
) -> MeshCommunicator:
    """This rank's communicator: its party's world joined, and its links to other parties.

    Every rank of the job calls this at once. ``address`` is where this rank accepts links
    from other parties (its worker's advertised address); ``tls`` may be None only when the
    job has a single party. ``timeout_s`` bounds meeting the others; ``collective_timeout_s``
    bounds any one operation afterwards (a peer that stops answering fails the rank).
    ``party_store``: where the party's process group meets (default: ``store``); in a job of
    several parties it is the party's own (``tessera_ml.comm.world``), since the ranks of its
    group connect to whatever addresses they read there, without TLS.
    """
    device = comm_device(backend, device)
    mesh = MeshCommunicator(rank=rank, parties=parties, backend=backend, device=device, tls=tls)
    mesh.address = address
    foreign = [r for r in range(len(parties)) if not mesh.is_local(r)]
    if foreign and tls is None:
        raise ValueError("a job of several parties needs TLS between them")
    if len(mesh.members) > 1:
        _join_party_world(mesh, party_store or store, backend, device, collective_timeout_s)
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
        mesh._world = Group("world", mesh._world.ranks, LocalGroup(None))


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
