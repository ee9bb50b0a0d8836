"""A direct TCP link between the two compute parties for the online phase.

Every online round is one symmetric exchange, so the round's latency is the protocol's cost
floor. Over the job's gloo communicator a received message passes through gloo's network
thread, which then wakes the waiting rank: two thread wake-ups per round. On a machine where
the parties share cores, those wake-ups can take longer than the round's computation (see the
README's measurements). Over this link the party's own thread sends and receives (non-blocking
writes and reads, ``poll`` while neither can proceed), which leaves one wake-up at most.

What crosses the link is what would cross the communicator: masked shares, uniform to the
receiver. Party 0 listens on the address gloo would use (``GLOO_SOCKET_IFNAME``'s, else the
host name's) and sends it to party 1 over the communicator, with a random token that party 1
presents first on the connection: a connection without it is closed, so no other process can
take party 1's place. If party 1 cannot connect, both fall back to the communicator and say
so.
"""

from __future__ import annotations

import fcntl
import hmac
import os
import socket
import struct
import time

import torch

from tessera_ml.algorithms.mpc_mixed.channel import SPIN_S, CommPeer, DirectPeer, Peer
from tessera_ml.comm.base import Communicator

LINKS = ("direct", "communicator")
CONNECT_TIMEOUT_S = 20.0
TOKEN_BYTES = 16
_TOKEN_WORDS = struct.Struct(f"<{TOKEN_BYTES // 8}q")
_ENDPOINT_WORDS = 2 + _TOKEN_WORDS.size // 8
"""Address, port and token, as int64 words over the communicator."""
_SIOCGIFADDR = 0x8915


def local_address(interface: str | None) -> str:
    """The IPv4 address gloo's device would bind: ``interface``'s, else the host name's."""
    if interface:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            request = struct.pack("256s", interface.encode()[:15])
            try:
                reply = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, request)
            except OSError as exc:
                raise OSError(f"interface {interface!r} has no IPv4 address") from exc
            return socket.inet_ntoa(reply[20:24])
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def open_link(
    comm: Communicator,
    index: int,
    other: int,
    link: str,
    interface: str | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    spin_s: float = SPIN_S,
) -> tuple[Peer, str | None]:
    """This compute party's peer over ``link`` ("direct" or "communicator"), and why it fell
    back to the communicator when the direct link could not be made (None otherwise). Both
    parties call this at the same point of the protocol. ``spin_s``: the direct link's retry
    before it sleeps (``channel.SPIN_S``)."""
    if link not in LINKS:
        raise ValueError(f"link is one of {', '.join(LINKS)}, not {link!r}")
    if link == "communicator":
        return CommPeer(comm=comm, other=other), None
    if index == 0:
        sock, reason = _accept(comm, other, interface, connect_timeout_s)
    else:
        sock, reason = _connect(comm, other, connect_timeout_s)
    if sock is None:
        return CommPeer(comm=comm, other=other), reason
    return DirectPeer(sock=sock, spin_s=spin_s), None


def _accept(
    comm: Communicator, other: int, interface: str | None, timeout_s: float
) -> tuple[socket.socket | None, str | None]:
    """Party 0: listen, tell party 1 where and the token to present, and take the connection
    that presents it."""
    token = os.urandom(TOKEN_BYTES)
    try:
        host = local_address(interface)
        listener = socket.create_server((host, 0), backlog=8)
    except OSError as exc:
        comm.send(torch.zeros(_ENDPOINT_WORDS, dtype=torch.int64), other)
        both_succeeded(comm, other, ok=False)
        return None, f"cannot listen: {exc}"
    with listener:
        address = struct.unpack("!I", socket.inet_aton(host))[0]
        endpoint = [address, listener.getsockname()[1], *_TOKEN_WORDS.unpack(token)]
        comm.send(torch.tensor(endpoint, dtype=torch.int64), other)
        if not both_succeeded(comm, other, ok=True):
            return None, "the other compute party could not connect"
        return _take(listener, token, timeout_s), None


def _take(listener: socket.socket, token: bytes, timeout_s: float) -> socket.socket:
    """The first connection that presents ``token``; others are closed."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        listener.settimeout(left)
        try:
            sock, _ = listener.accept()
        except TimeoutError:
            break
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            presented = b""
            while len(presented) < TOKEN_BYTES:
                chunk = sock.recv(TOKEN_BYTES - len(presented))
                if not chunk:
                    break
                presented += chunk
        except OSError:
            presented = b""
        if hmac.compare_digest(presented, token):
            sock.settimeout(None)
            return sock
        sock.close()
    raise ConnectionError(
        f"the other compute party did not present its token within {timeout_s:.0f} s"
    )


def receive_endpoint(comm: Communicator, other: int) -> tuple[str, int, bytes] | None:
    """Party 1: where party 0 listens and the token to present (None: it cannot listen)."""
    where = torch.empty(_ENDPOINT_WORDS, dtype=torch.int64)
    comm.recv(where, other)
    address, port, *words = (int(v) for v in where)
    if port == 0:
        return None
    host = socket.inet_ntoa(struct.pack("!I", address))
    return host, port, _TOKEN_WORDS.pack(*words)


def dial(host: str, port: int, token: bytes, timeout_s: float) -> socket.socket:
    """Connect and present the token."""
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        sock.sendall(token)
    except OSError:
        sock.close()
        raise
    return sock


def _connect(
    comm: Communicator, other: int, timeout_s: float
) -> tuple[socket.socket | None, str | None]:
    """Party 1: connect to where party 0 listens."""
    endpoint = receive_endpoint(comm, other)
    if endpoint is None:
        both_succeeded(comm, other, ok=False)
        return None, "the other compute party cannot listen"
    host, port, token = endpoint
    try:
        sock = dial(host, port, token, timeout_s)
    except OSError as exc:
        both_succeeded(comm, other, ok=False)
        return None, f"cannot connect to {host}:{port}: {exc}"
    both_succeeded(comm, other, ok=True)
    return sock, None


def both_succeeded(comm: Communicator, other: int, ok: bool) -> bool:
    """Tell the other party whether this side succeeded; True when both did."""
    mine = torch.tensor([int(ok)], dtype=torch.int64)
    theirs = torch.empty(1, dtype=torch.int64)
    work = comm.isend(mine, other)
    comm.recv(theirs, other)
    work.wait()
    return ok and int(theirs[0]) == 1
