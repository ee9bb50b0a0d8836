"""A link between two ranks that talk in symmetric rounds: one ``exchange`` per round.

In every round each end sends a message and receives the other's message of the same shapes
(the two compute parties of ``mpc_mixed`` exchanging masked shares, the two processors of a
``zo_pair`` pair exchanging their losses). ``DirectPeer`` runs over a connection of the two
ranks' own (TLS between parties, see ``pair_link``), ``CommPeer`` over the job's communicator
(p2p send/recv); ``LocalPeer`` pairs run both ends as threads of one process, which keeps
protocol tests fast. All count bytes and rounds, and can record every message received.
"""

from __future__ import annotations

import queue
import select
import socket
import ssl
import struct
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy
import torch

from tessera_ml.comm.base import ByteStats, Communicator
from tessera_ml.comm.codec import ARRAY_DTYPES, TENSOR_DTYPES
from tessera_ml.comm.links import LinkError

_HEADER = struct.Struct("<q")
SOCKET_BUFFER = 4 << 20
TIMEOUT_S = 300.0
"""How long a rank waits for the other's message: as long as the communicator's collectives
wait by default."""
SPIN_S = 300e-6
"""How long a rank on the direct link keeps retrying a round before it sleeps in ``poll``.
Waking a sleeping rank can take longer than the other rank's message takes to arrive (on
virtual machines most of all); a short retry saves that wake-up, and costs at most this much CPU
time per round when the other rank is slow."""


@dataclass
class LinkStats:
    """Traffic of one end of the link: bytes it sent and rounds it took part in."""

    bytes_sent: int = 0
    rounds: int = 0
    messages: int = 0
    sleeps: int = 0
    """Times this end slept waiting for the other (direct link only)."""

    def snapshot(self) -> tuple[int, int]:
        return self.bytes_sent, self.rounds


@dataclass
class Peer(ABC):
    """This rank's view of the other end of the link."""

    stats: LinkStats = field(default_factory=LinkStats)
    record: list[torch.Tensor] | None = None
    on_exchange: Callable[[list[torch.Tensor]], None] | None = None

    def exchange(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        """Send ``tensors`` and receive the peer's tensors of the same shapes: one round."""
        mine = [t.contiguous() for t in tensors]
        if self.on_exchange is not None:
            self.on_exchange(mine)
        theirs = self._swap(mine)
        self.stats.rounds += 1
        self.stats.messages += len(mine)
        self.stats.bytes_sent += sum(t.numel() * t.element_size() for t in mine)
        if self.record is not None:
            self.record.extend(t.clone() for t in theirs)
        return theirs

    def close(self) -> None:  # noqa: B027 - only a socket needs closing
        """Release the link."""

    def barrier(self) -> None:
        """Wait until the other end gets here too: one byte each way, not a protocol round and
        not counted."""
        self._swap([torch.zeros(1, dtype=torch.uint8)])

    @abstractmethod
    def _swap(self, mine: list[torch.Tensor]) -> list[torch.Tensor]: ...


@dataclass
class CommPeer(Peer):
    """Over the job's communicator, to global rank ``other``."""

    comm: Communicator | None = None
    other: int = -1

    def _swap(self, mine: list[torch.Tensor]) -> list[torch.Tensor]:
        assert self.comm is not None
        flat = torch.from_numpy(_message(mine, header=False))
        out = torch.empty_like(flat)
        send = self.comm.isend(flat, self.other)
        self.comm.recv(out, self.other)
        send.wait()
        return _unpack(out.numpy(), mine)


@dataclass
class DirectPeer(Peer):
    """The other rank over a connected socket, plain TCP or TLS (``pair_link.open_link``
    makes it): the rank's own thread writes and reads without blocking and ``poll``s while
    neither can proceed, after retrying for ``spin_s`` (see ``SPIN_S``); each message carries
    its length, so ends out of step are caught. ``tap``, if set, is called as
    ``tap(other, message)`` with each message's plaintext before it is sent (the communicator's
    ``tap``, for tests that look for plaintext on the wire). ``account``, if set (the
    communicator's ``stats``), counts each message's bytes as sent to and received from rank
    ``other``, as the communicator counts its own messages, so the rank's per-peer traffic
    (``bytes_sent.to.<rank>``) covers the link too."""

    sock: socket.socket | None = None
    timeout_s: float = TIMEOUT_S
    spin_s: float = SPIN_S
    tap: Callable[[int, memoryview], None] | None = None
    other: int = -1
    account: ByteStats | None = None

    def __post_init__(self) -> None:
        assert self.sock is not None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            self.sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
        self.sock.setblocking(False)
        self._poll = select.poll()
        self._poll.register(self.sock, select.POLLIN)
        self._ready = select.poll()
        self._ready.register(self.sock, select.POLLIN)
        # over TLS, a read that would block raises an error that costs more than a look at the
        # socket, so the rank looks before it reads
        self._tls = self.sock if isinstance(self.sock, ssl.SSLSocket) else None
        self._readable = self._tls_readable if self._tls is not None else None

    def _swap(self, mine: list[torch.Tensor]) -> list[torch.Tensor]:
        try:
            return self._swap_bytes(mine)
        except ssl.SSLError as exc:
            raise LinkError(f"the link to the other rank failed: {exc}") from exc

    def _swap_bytes(self, mine: list[torch.Tensor]) -> list[torch.Tensor]:
        sock, readable = self.sock, self._readable
        assert sock is not None
        out = _message(mine).data
        if self.tap is not None:
            self.tap(self.other, out)
        total = len(out)
        size = total - _HEADER.size
        raw = numpy.empty(total, dtype=numpy.uint8)
        into = raw.data
        sent = got = 0
        stalled_since: float | None = None
        while sent < total or got < total:
            moved = False
            wait_in = wait_out = False
            if sent < total:
                # a TLS write that could not finish is retried with the same bytes, as it must be
                try:
                    n = sock.send(out[sent:])
                    sent, moved = sent + n, n > 0
                except (BlockingIOError, ssl.SSLWantWriteError):
                    wait_out = True
                except ssl.SSLWantReadError:
                    wait_in = True
            if got < total:
                if readable is not None and not readable():
                    n, wait_in = -1, True
                else:
                    try:
                        n = sock.recv_into(into[got:])
                    except (BlockingIOError, ssl.SSLWantReadError):
                        n, wait_in = -1, True
                    except ssl.SSLWantWriteError:
                        n, wait_out = -1, True
                if n == 0:
                    raise LinkError("the peer closed the link")
                if n > 0:
                    got, moved = got + n, True
            if moved:
                stalled_since = None
                continue
            now = time.perf_counter()
            if stalled_since is None:
                stalled_since = now
            if now - stalled_since >= self.spin_s:
                self._wait(wait_out, wait_in)
        if _HEADER.unpack_from(into)[0] != size:
            raise RuntimeError("the two ends of the link are out of step")
        if self.account is not None:
            self.account.add_p2p(self.other, sent=size, received=size)
        return _unpack(raw[_HEADER.size :], mine)

    def _tls_readable(self) -> bool:
        """The socket has bytes, or decrypted bytes wait inside the SSL object."""
        tls = self._tls
        return bool(self._ready.poll(0)) or (tls is not None and tls.pending() > 0)

    def _wait(self, writing: bool, reading: bool) -> None:
        assert self.sock is not None
        if reading and self._tls is not None and self._tls.pending():
            return
        events = (select.POLLIN if reading else 0) | (select.POLLOUT if writing else 0)
        self._poll.modify(self.sock, events)
        self.stats.sleeps += 1
        if not self._poll.poll(self.timeout_s * 1000):
            raise TimeoutError(f"the other rank did not answer for {self.timeout_s:.0f} s")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = self._tls = None


@dataclass
class LocalPeer(Peer):
    """One end of an in-process pair (see ``local_pair``)."""

    outbox: queue.Queue[list[torch.Tensor]] | None = None
    inbox: queue.Queue[list[torch.Tensor]] | None = None

    def _swap(self, mine: list[torch.Tensor]) -> list[torch.Tensor]:
        assert self.outbox is not None and self.inbox is not None
        self.outbox.put([t.clone() for t in mine])
        theirs = self.inbox.get(timeout=60)
        if [t.shape for t in theirs] != [t.shape for t in mine]:
            raise RuntimeError("the two ends of the link are out of step")
        return theirs


def local_pair() -> tuple[LocalPeer, LocalPeer]:
    a: queue.Queue[list[torch.Tensor]] = queue.Queue()
    b: queue.Queue[list[torch.Tensor]] = queue.Queue()
    return LocalPeer(outbox=a, inbox=b), LocalPeer(outbox=b, inbox=a)


def _message(tensors: list[torch.Tensor], header: bool = True) -> numpy.ndarray:
    """One round's tensors as raw bytes in one new buffer, each copied once, so a round is one
    message whatever the dtypes; with ``header`` (the direct link's), behind the payload's
    length."""
    sizes = [t.numel() * t.element_size() for t in tensors]
    offset = _HEADER.size if header else 0
    message = numpy.empty(offset + sum(sizes), dtype=numpy.uint8)
    if header:
        _HEADER.pack_into(message.data, 0, len(message) - offset)
    for t, size in zip(tensors, sizes, strict=True):
        message[offset : offset + size] = _bytes_of(t)
        offset += size
    return message


def _unpack(payload: numpy.ndarray, like: list[torch.Tensor]) -> list[torch.Tensor]:
    """Tensors shaped as ``like`` from a message's payload (bytes). ``payload`` must be a
    buffer of this message alone: the tensors are views of it where their bytes are aligned
    for their dtype (copies elsewhere), so nothing else may write to it."""
    start = payload.ctypes.data
    out: list[torch.Tensor] = []
    offset = 0
    for t in like:
        size = t.numel() * t.element_size()
        piece = payload[offset : offset + size]
        if (start + offset) % t.element_size():
            piece = piece.copy()
        kind = _NUMPY.get(t.dtype)
        if kind is None:  # a dtype numpy lacks (bfloat16): torch's own view
            out.append(torch.from_numpy(piece).view(t.dtype).view(t.shape))
        else:
            out.append(torch.from_numpy(piece.view(kind).reshape(t.shape)))
        offset += size
    return out


def _bytes_of(t: torch.Tensor) -> numpy.ndarray:
    """A contiguous tensor's bytes as a flat uint8 array, without a copy."""
    if t.dtype in _NUMPY:
        return t.numpy().reshape(-1).view(numpy.uint8)
    return t.reshape(-1).view(torch.uint8).numpy()


_NUMPY = {
    dtype: torch.empty(0, dtype=dtype).numpy().dtype
    for name, dtype in TENSOR_DTYPES.items()
    if name in ARRAY_DTYPES
}
"""The declared dtypes numpy has too (``codec``'s), which the link moves through numpy's views,
whose calls cost less than torch's; native byte order, as the tensors hold them."""


def run_pair(target: object, args0: tuple[object, ...], args1: tuple[object, ...]) -> list[object]:
    """Run ``target(*args0)`` and ``target(*args1)`` as two threads; return both results."""
    results: list[object] = [None, None]
    errors: list[BaseException] = []

    def body(i: int, args: tuple[object, ...]) -> None:
        try:
            results[i] = target(*args)  # type: ignore[operator]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i, a)) for i, a in enumerate((args0, args1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results
