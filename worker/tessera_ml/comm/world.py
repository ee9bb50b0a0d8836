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


@dataclass
class JobWorld:
    """A rank's communicator with the store it met its peers through (and serves, rank 0)."""

    comm: MeshCommunicator
    store: StoreClient
    server: StoreServer | None

    def close(self, linger_s: float = 10.0) -> None:
        """Leave the world; rank 0 serves the store until every rank has left (or
        ``linger_s`` passed), so no rank loses it while tearing down its process group."""
        self.comm.close()
        with contextlib.suppress(Exception):
            self.store.add(LEFT, 1)
            if self.server is not None:
                deadline = time.monotonic() + linger_s
                while self.store.add(LEFT, 0) < self.comm.world_size:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
        self.store.close()
        if self.server is not None:
            self.server.close()


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
    server = (
        StoreServer(*store_address, tls, secret, listener=store_listener) if rank == 0 else None
    )
    try:
        store = StoreClient(
            store_address, parties[0], tls, secret, timeout=timedelta(seconds=timeout_s)
        )
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
        )
    except BaseException:
        if server is not None:
            server.close()
        raise
    return JobWorld(comm, store, server)


__all__ = ["JobWorld", "MeshCommunicator", "join_world"]
