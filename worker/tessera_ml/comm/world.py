"""Joining a job's world: the attempt's rendezvous store, then the mesh of parties.

What a platform rank does (``tessera_worker.rank``) and what the test and benchmark harness
does (``tessera_ml.worlds``), so both run the same code.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import torch

from tessera_ml.comm.mesh import MeshCommunicator, connect_mesh
from tessera_ml.comm.rendezvous import StoreClient, StoreServer
from tessera_ml.security.pki import Credentials
from tessera_ml.security.tls import TlsConfig

LEFT = "world/left"
PARTY_STORE = "party-store"


@dataclass
class JobWorld:
    """A rank's communicator with the stores it met its peers through: the attempt's (rank 0
    serves it) and, in a job of several parties, its party's (the party's lowest rank serves
    it)."""

    comm: MeshCommunicator
    store: StoreClient
    server: StoreServer | None
    party_store: StoreClient | None = None
    party_server: StoreServer | None = None

    def close(self, linger_s: float = 10.0) -> None:
        """Leave the world; a rank that serves a store serves it until every rank using it has
        left (or ``linger_s`` passed), so no rank loses it while tearing down its process
        group."""
        self.comm.close()
        if self.party_store is not None:
            _leave(self.party_store, self.party_server, len(self.comm.members), linger_s)
        _leave(self.store, self.server, self.comm.world_size, linger_s)


def _leave(store: StoreClient, server: StoreServer | None, users: int, linger_s: float) -> None:
    with contextlib.suppress(Exception):
        store.add(LEFT, 1)
        if server is not None:
            deadline = time.monotonic() + linger_s
            while store.add(LEFT, 0) < users:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
    store.close()
    if server is not None:
        server.close()


def join_world(
    *,
    rank: int,
    parties: Sequence[str],
    store_address: tuple[str, int],
    address: str,
    credentials: Credentials,
    attempt: str,
    secret: bytes,
    backend: str = "gloo",
    device: torch.device | None = None,
    timeout_s: float = 300.0,
    collective_timeout_s: float = 300.0,
    store_listener: socket.socket | None = None,
) -> JobWorld:
    """Rank 0 serves the store at ``store_address`` (its own address), on ``store_listener``
    where its launcher reserved that port for it; every rank joins it, then its party's world
    and its links to the other parties."""
    tls = TlsConfig(credentials, attempt=attempt)
    timeout = timedelta(seconds=timeout_s)
    server = (
        StoreServer(*store_address, tls, secret, listener=store_listener) if rank == 0 else None
    )
    store: StoreClient | None = None
    party_store: StoreClient | None = None
    party_server: StoreServer | None = None
    try:
        store = StoreClient(store_address, parties[0], tls, secret, timeout=timeout)
        if _needs_own_store(rank, parties):
            party_store, party_server = _party_store(rank, parties, store, address, tls, secret)
            party_store.set_timeout(timeout)
        comm = connect_mesh(
            rank=rank,
            parties=parties,
            store=store,
            address=address,
            tls=tls,
            backend=backend,
            device=device,
            timeout_s=timeout_s,
            collective_timeout_s=collective_timeout_s,
            party_store=party_store,
        )
    except BaseException:
        for client in (party_store, store):
            if client is not None:
                client.close()
        for serving in (party_server, server):
            if serving is not None:
                serving.close()
        raise
    return JobWorld(comm, store, server, party_store, party_server)


def _needs_own_store(rank: int, parties: Sequence[str]) -> bool:
    """Whether this rank's party meets in a store of its own: in a job of several parties,
    where it has a process group. Every member of the attempt may write any key of the
    attempt's store, and its server may be another party's rank 0; the party's ranks would
    connect, without TLS, to whatever addresses they read there."""
    return len(set(parties)) > 1 and list(parties).count(parties[rank]) > 1


def _party_store(
    rank: int,
    parties: Sequence[str],
    store: StoreClient,
    address: str,
    tls: TlsConfig,
    secret: bytes,
) -> tuple[StoreClient, StoreServer | None]:
    """The party's own store: its lowest rank serves it to certificates of the party only, and
    its address goes through the attempt's store. Another party that rewrites that address
    sends the party's ranks to a server that cannot prove it is the party: they fail, and meet
    nowhere else."""
    party = parties[rank]
    key = f"{PARTY_STORE}/{party}"
    server = None
    if rank == list(parties).index(party):
        server = StoreServer(address, 0, tls, secret, party=party)
        served_host, served_port = server.address
        store.set(key, f"{served_host}:{served_port}")
    try:
        host, _, port = store.get(key).decode().rpartition(":")
        return StoreClient((host, int(port)), party, tls, secret), server
    except BaseException:
        if server is not None:
            server.close()
        raise


__all__ = ["JobWorld", "MeshCommunicator", "join_world"]
