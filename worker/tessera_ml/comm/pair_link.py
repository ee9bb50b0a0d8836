"""A direct link between two ranks that exchange a message each way, round after round.

When a round's latency is a protocol's cost floor (``mpc_mixed``'s online phase, the loss
exchange of a ``zo_pair`` pair), the job's communicator is a slow way to make it: there a
received message passes through a network thread, which then wakes the waiting rank, two thread
wake-ups per round. On a machine where the ranks share cores, those wake-ups can take longer
than the round's computation (see the two algorithms' READMEs). Over this link the rank's own
thread sends and receives (non-blocking writes and reads, ``poll`` while neither can proceed),
which leaves one wake-up at most.

What crosses the link is what would cross the communicator. End 0 listens where the other end
reaches it (for another party's rank, where the mesh accepts other parties' links; within a
party, on the address gloo would use: ``GLOO_SOCKET_IFNAME``'s, else the host name's) and sends
it to end 1 over the communicator, with a random token that end 1 presents first on the
connection. When the two ends belong to different parties of a job whose communicator joins
parties over TLS (a platform job, ``MeshCommunicator``), so does the link: a TLS 1.3 connection
on which each end proves with its certificate of this attempt that it is the other end's party,
the token then binding the connection to this link. Two ranks of one party, whose communicator
joins them by plaintext gloo, get a plain TCP connection with the token, as does one plaintext
gloo world (the benchmarks' baseline).

End 0 handles every connection it accepts in a thread of its own (handshake, then token, within
the link's deadline) and takes the first that completes both; the others are closed, so a
stranger that connects and stays silent, or fails its handshake, cannot keep end 1 out. If the
link cannot be made, both ends fall back to the communicator and say why.
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import os
import socket
import ssl
import struct
import threading
import time
from types import TracebackType

import torch

from tessera_ml.comm.base import Communicator
from tessera_ml.comm.local import LocalCommunicator
from tessera_ml.comm.mesh import MeshCommunicator
from tessera_ml.comm.peer import SPIN_S, TIMEOUT_S, CommPeer, DirectPeer, Peer
from tessera_ml.comm.torch_dist import TorchDistCommunicator
from tessera_ml.security.tls import TlsConfig

LINKS = ("direct", "communicator")
CONNECT_TIMEOUT_S = 20.0
TOKEN_BYTES = 16
ACCEPT_POLL_S = 0.1
"""How often end 0's accepting thread looks at the deadline while nobody connects."""
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


def listen(host: str) -> socket.socket:
    """End 0's listening socket (tests wrap this to connect strangers before end 1)."""
    return socket.create_server((host, 0), backlog=16)


class UnknownParties(ValueError):
    """The communicator cannot say whether the other rank belongs to another party."""


def tls_to(comm: Communicator, other: int) -> TlsConfig | None:
    """The TLS a link to rank ``other`` takes: the mesh's, when ``other`` belongs to another
    party; None between two ranks of one party, which the mesh joins by plaintext gloo as well,
    and in one plaintext world (``TorchDistCommunicator``, the benchmarks' baseline, or
    ``LocalCommunicator``'s threads). Any other communicator (a wrapper, say) is refused rather
    than trusted to join one party: ``UnknownParties``."""
    if isinstance(comm, MeshCommunicator):
        return None if comm.is_local(other) else comm.tls
    if isinstance(comm, TorchDistCommunicator | LocalCommunicator):
        return None
    raise UnknownParties(
        f"a {type(comm).__name__} does not say whether rank {other} is of another party"
    )


def open_link(
    comm: Communicator,
    index: int,
    other: int,
    link: str,
    interface: str | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
    spin_s: float = SPIN_S,
    timeout_s: float = TIMEOUT_S,
) -> tuple[Peer, str | None]:
    """This rank's peer (end ``index``, 0 or 1, of the link to rank ``other``) over ``link``
    ("direct" or "communicator"), and why it fell back to the communicator when the direct link
    could not be made (None otherwise). Both ends call this at the same point of their
    protocol. ``interface``: where end 0 listens (default: for a rank of another party, where
    the mesh accepts other parties' links; else ``GLOO_SOCKET_IFNAME``'s address, as gloo).
    ``spin_s``: the direct link's retry before it sleeps (``peer.SPIN_S``); ``timeout_s``: how
    long it waits for the other end's message. Between parties, the communicator's ``tap``, if
    any, sees what the direct link sends, as it is at the time of the call."""
    if link not in LINKS:
        raise ValueError(f"link is one of {', '.join(LINKS)}, not {link!r}")
    if link == "communicator":
        return CommPeer(comm=comm, other=other), None
    try:
        tls = tls_to(comm, other)
    except UnknownParties as exc:  # both ends use the same kind of communicator
        return CommPeer(comm=comm, other=other), str(exc)
    party = comm.party_of(other) if isinstance(comm, MeshCommunicator) else None
    address = None
    if interface is None:
        interface = os.environ.get("GLOO_SOCKET_IFNAME")
        # another party reaches this rank where the mesh listens; gloo's interface may be
        # loopback, when this rank's party is all on this host
        if tls is not None and isinstance(comm, MeshCommunicator):
            address = comm.address
    if index == 0:
        sock, reason = _accept(comm, other, interface, address, connect_timeout_s, tls, party)
    else:
        sock, reason = _connect(comm, other, connect_timeout_s, tls, party)
    if sock is None:
        return CommPeer(comm=comm, other=other), reason
    tap = comm.tap if tls is not None and isinstance(comm, MeshCommunicator) else None
    peer = DirectPeer(
        sock=sock, spin_s=spin_s, timeout_s=timeout_s, tap=tap, other=other, account=comm.stats
    )
    return peer, None


def link_encrypted(comm: Communicator, peer: Peer) -> bool:
    """Whether ``peer``'s rounds cross in TLS: a direct link over TLS, or the communicator's
    messages between two parties joined by TLS."""
    if isinstance(peer, DirectPeer):
        return isinstance(peer.sock, ssl.SSLSocket)
    if not isinstance(peer, CommPeer):
        return False
    try:
        return tls_to(comm, peer.other) is not None
    except UnknownParties:
        return False


def _accept(
    comm: Communicator,
    other: int,
    interface: str | None,
    address: str | None,
    timeout_s: float,
    tls: TlsConfig | None,
    party: str | None,
) -> tuple[socket.socket | None, str | None]:
    """End 0: listen, tell end 1 where and the token to present, and take the connection
    that completes the handshake and presents it."""
    token = os.urandom(TOKEN_BYTES)
    try:
        # the worker's advertised address may be a name: end 1 is told an IPv4 address
        host = socket.gethostbyname(address) if address else local_address(interface)
        listener = listen(host)
    except OSError as exc:
        comm.send(torch.zeros(_ENDPOINT_WORDS, dtype=torch.int64), other)
        _hear(comm, other)
        _tell(comm, other, ok=False)
        return None, f"cannot listen: {exc}"
    deadline = time.monotonic() + timeout_s
    with listener, Acceptor(listener, token, deadline, tls, party) as acceptor:
        address = struct.unpack("!I", socket.inet_aton(host))[0]
        endpoint = [address, listener.getsockname()[1], *_TOKEN_WORDS.unpack(token)]
        comm.send(torch.tensor(endpoint, dtype=torch.int64), other)
        connected = _hear(comm, other)
        sock = acceptor.wait() if connected else None
        _tell(comm, other, ok=sock is not None)
        if not connected:
            return None, "the other end could not connect"
        if sock is None:
            return None, f"no connection completed the handshake and token in {timeout_s:.0f} s"
        acceptor.keep()
        return sock, None


def _hear(comm: Communicator, other: int) -> bool:
    """End 0: whether end 1 says it connected (``both_succeeded``'s message)."""
    theirs = torch.empty(1, dtype=torch.int64)
    comm.recv(theirs, other)
    return int(theirs[0]) == 1


def _tell(comm: Communicator, other: int, ok: bool) -> None:
    """End 0: whether it took end 1's connection (``both_succeeded``'s answer)."""
    comm.send(torch.tensor([int(ok)], dtype=torch.int64), other)


class Acceptor:
    """Takes connections on ``listener`` until ``deadline``, each in a thread of its own: the
    TLS handshake (with ``tls``: the peer must hold ``party``'s certificate of this attempt),
    then the token. ``wait`` returns the first that completed both; closing (leaving the
    ``with`` block) stops accepting and closes every other connection, and the chosen one too
    unless ``keep`` was called."""

    def __init__(
        self,
        listener: socket.socket,
        token: bytes,
        deadline: float,
        tls: TlsConfig | None,
        party: str | None,
    ) -> None:
        if tls is not None and party is None:
            raise ValueError("a TLS link needs the party the peer must be")
        self._listener = listener
        self._token = token
        self._deadline = deadline
        self._tls = tls
        self._party = party
        self._state = threading.Condition()
        self._chosen: socket.socket | None = None
        self._kept = False
        self._closed = False
        self._pending: dict[int, socket.socket] = {}
        """Duplicates of the connections being admitted, to cut them off when closing."""
        self._ids = iter(range(1 << 62))
        self._thread = threading.Thread(target=self._accept_loop, name="link-accept", daemon=True)

    def __enter__(self) -> Acceptor:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def wait(self) -> socket.socket | None:
        """The chosen connection, waiting for it until the deadline (None: none came)."""
        with self._state:
            while self._chosen is None and not self._closed:
                left = self._deadline - time.monotonic()
                if left <= 0:
                    break
                self._state.wait(left)
            return self._chosen

    def keep(self) -> None:
        """Leave the chosen connection open on closing: the caller owns it."""
        with self._state:
            self._kept = self._chosen is not None

    def close(self) -> None:
        with self._state:
            self._closed = True
            pending = list(self._pending.values())
            self._pending.clear()
            chosen = None if self._kept else self._chosen
            self._state.notify_all()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        for watch in pending:
            _cut(watch)
        if chosen is not None:
            _cut(chosen)
        if self._thread.is_alive():
            self._thread.join()

    def _accept_loop(self) -> None:
        self._listener.settimeout(ACCEPT_POLL_S)
        while True:
            with self._state:
                if self._closed or self._chosen is not None:
                    return
            if time.monotonic() >= self._deadline:
                return
            try:
                raw, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._state:
                if self._closed or self._chosen is not None:
                    raw.close()
                    return
                try:
                    watch = raw.dup()
                except OSError:  # out of descriptors: drop this one, keep accepting
                    raw.close()
                    continue
                key = next(self._ids)
                self._pending[key] = watch
            threading.Thread(
                target=self._admit, args=(raw, key), name="link-admit", daemon=True
            ).start()

    def _admit(self, raw: socket.socket, key: int) -> None:
        sock: socket.socket = raw
        try:
            raw.settimeout(max(self._deadline - time.monotonic(), 1e-3))
            if self._tls is not None:
                assert self._party is not None
                left = max(self._deadline - time.monotonic(), 1e-3)
                secure = self._tls.accept(raw, timeout_s=left)
                sock = secure
                self._tls.expect(secure, self._party)
            ok = hmac.compare_digest(_exact(sock, TOKEN_BYTES), self._token)
        except (OSError, ValueError):  # ssl.SSLError and PeerRefused are OSErrors
            ok = False
        with self._state:
            watch = self._pending.pop(key, None)
            take = ok and watch is not None and self._chosen is None and not self._closed
            if take:
                sock.settimeout(None)
                self._chosen = sock
                self._state.notify_all()
        if watch is not None:
            watch.close()  # a duplicate: closing it leaves the connection as it is
        if not take:
            _cut(sock)
            raw.close()


def _exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _cut(sock: socket.socket) -> None:
    """Shut a connection down (which also ends a thread blocked on it) and close it."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


def receive_endpoint(comm: Communicator, other: int) -> tuple[str, int, bytes] | None:
    """End 1: where end 0 listens and the token to present (None: it cannot listen)."""
    where = torch.empty(_ENDPOINT_WORDS, dtype=torch.int64)
    comm.recv(where, other)
    address, port, *words = (int(v) for v in where)
    if port == 0:
        return None
    host = socket.inet_ntoa(struct.pack("!I", address))
    return host, port, _TOKEN_WORDS.pack(*words)


def dial(
    host: str,
    port: int,
    token: bytes,
    timeout_s: float,
    tls: TlsConfig | None = None,
    party: str | None = None,
) -> socket.socket:
    """Connect and present the token; with ``tls``, over TLS to a listener that must hold
    ``party``'s certificate of this attempt (else ``PeerRefused``)."""
    if tls is None:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    else:
        if party is None:
            raise ValueError("a TLS link needs the party the peer must be")
        sock = tls.connect((host, port), party, timeout_s)
    try:
        sock.sendall(token)
    except OSError:
        sock.close()
        raise
    return sock


def _connect(
    comm: Communicator,
    other: int,
    timeout_s: float,
    tls: TlsConfig | None,
    party: str | None,
) -> tuple[socket.socket | None, str | None]:
    """End 1: connect to where end 0 listens."""
    endpoint = receive_endpoint(comm, other)
    if endpoint is None:
        both_succeeded(comm, other, ok=False)
        return None, "the other end cannot listen"
    host, port, token = endpoint
    try:
        sock = dial(host, port, token, timeout_s, tls, party)
    except OSError as exc:  # ssl.SSLError and PeerRefused are OSErrors
        both_succeeded(comm, other, ok=False)
        return None, f"cannot connect to {host}:{port}: {exc}"
    if not both_succeeded(comm, other, ok=True):
        sock.close()
        return None, "the other end did not take the connection"
    return sock, None


def both_succeeded(comm: Communicator, other: int, ok: bool) -> bool:
    """End 1's side: tell end 0 whether this side succeeded; True when both did."""
    mine = torch.tensor([int(ok)], dtype=torch.int64)
    theirs = torch.empty(1, dtype=torch.int64)
    work = comm.isend(mine, other)
    comm.recv(theirs, other)
    work.wait()
    return ok and int(theirs[0]) == 1
