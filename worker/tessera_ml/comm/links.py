"""TLS links between two ranks of different parties: one connection per direction.

A link carries frames ``u32 tag, u64 length, payload``. The tag keeps apart what one pair of
ranks exchanges for different purposes (point-to-point messages, each group's collectives), as
gloo's tags do. Each direction has its own TLS connection, so one thread writes and one thread
reads each TLS session.

Reading is done by whichever waiting thread gets there first: it reads straight into the
destination when the next frame is the one it waits for, and files any other frame for the
thread that waits for its tag. A single waiting thread (the usual case) never hands a message
to another thread, so a round trip costs no thread wake-up.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

HEADER = struct.Struct("!IQ")
SMALL = 64 << 10
"""Payloads up to this size go out in one write with their header."""
MAX_FILED = 1 << 30
"""The largest frame a link buffers for a tag nobody is reading yet."""


class LinkError(ConnectionError):
    """The link broke or carried something other than what the protocol expects."""


class Done:
    """A ``Work`` that is already complete."""

    def wait(self) -> None:
        return None


class Pending:
    """A ``Work`` backed by a future."""

    def __init__(self, future: Future[Any]) -> None:
        self._future = future

    def wait(self) -> Any:
        return self._future.result()


def _read_into(sock: ssl.SSLSocket, view: memoryview) -> None:
    got, n = 0, len(view)
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise LinkError("the peer closed the link")
        got += k


class OutLink:
    """The sending direction to one peer."""

    def __init__(self, sock: ssl.SSLSocket, peer: int) -> None:
        self.sock = sock
        self.peer = peer
        self._write = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[Callable[[], None], Future[None]] | None] = (
            queue.SimpleQueue()
        )
        self._queued = 0
        self._idle = threading.Condition()
        self._thread: threading.Thread | None = None

    def send(self, tag: int, payload: memoryview) -> None:
        """Write one frame; earlier ``isend``s to this peer go first."""
        with self._idle:
            while self._queued:
                self._idle.wait()
        self._frame(tag, payload)

    def isend(self, tag: int, payload: memoryview) -> Pending:
        """Write one frame from this link's sender thread; ``payload`` must stay untouched
        until the returned work completes."""
        future: Future[None] = Future()
        with self._idle:
            self._queued += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._sender, name=f"link-to-{self.peer}", daemon=True
                )
                self._thread.start()
        self._queue.put((lambda: self._frame(tag, payload), future))
        return Pending(future)

    def _frame(self, tag: int, payload: memoryview) -> None:
        head = HEADER.pack(tag, len(payload))
        try:
            with self._write:
                if len(payload) <= SMALL:
                    self.sock.sendall(head + payload.tobytes())
                else:
                    self.sock.sendall(head)
                    self.sock.sendall(payload)
        except (OSError, ssl.SSLError) as exc:
            raise LinkError(f"sending to rank {self.peer} failed: {exc}") from exc

    def _sender(self) -> None:
        while (job := self._queue.get()) is not None:
            write, future = job
            try:
                write()
                future.set_result(None)
            except BaseException as exc:
                future.set_exception(exc)
            finally:
                with self._idle:
                    self._queued -= 1
                    self._idle.notify_all()

    def close(self) -> None:
        self._queue.put(None)
        _close(self.sock)


class InLink:
    """The receiving direction from one peer."""

    def __init__(self, sock: ssl.SSLSocket, peer: int) -> None:
        self.sock = sock
        self.peer = peer
        self._filed: dict[int, collections.deque[bytes]] = collections.defaultdict(
            collections.deque
        )
        self._state = threading.Condition()
        self._reading = False
        self._broken: BaseException | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._queued = 0

    def recv(self, tag: int, into: memoryview) -> None:
        """Fill ``into`` with the next frame of ``tag``; its length must match exactly."""
        with self._state:
            while self._queued:
                self._state.wait()
        self._recv(tag, into)

    def irecv(self, tag: int, into: memoryview) -> Pending:
        """``recv`` on this link's receiver thread, so the frame is taken as it arrives."""
        with self._state:
            self._queued += 1
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"link-from-{self.peer}")
        return Pending(self._pool.submit(self._queued_recv, tag, into))

    def _queued_recv(self, tag: int, into: memoryview) -> None:
        try:
            self._recv(tag, into)
        finally:
            with self._state:
                self._queued -= 1
                self._state.notify_all()

    def _recv(self, tag: int, into: memoryview) -> None:
        with self._state:
            while True:
                if self._broken is not None:
                    raise LinkError(f"the link from rank {self.peer} broke: {self._broken}")
                filed = self._filed.get(tag)
                if filed:
                    self._copy(filed.popleft(), into, tag)
                    return
                if not self._reading:
                    self._reading = True
                    break
                self._state.wait()
        try:
            self._read_until(tag, into)
        except BaseException as exc:
            with self._state:
                self._broken = exc
            raise
        finally:
            with self._state:
                self._reading = False
                self._state.notify_all()

    def _read_until(self, tag: int, into: memoryview) -> None:
        head = bytearray(HEADER.size)
        while True:
            try:
                _read_into(self.sock, memoryview(head))
                got_tag, length = HEADER.unpack(head)
                if got_tag == tag:
                    if length != len(into):
                        raise LinkError(
                            f"rank {self.peer} sent {length} bytes where {len(into)} were expected"
                        )
                    _read_into(self.sock, into)
                    return
                if length > MAX_FILED:
                    raise LinkError(f"rank {self.peer} sent an unexpected frame of {length} B")
                data = bytearray(length)
                _read_into(self.sock, memoryview(data))
            except (OSError, ssl.SSLError) as exc:
                raise LinkError(f"receiving from rank {self.peer} failed: {exc}") from exc
            with self._state:
                self._filed[got_tag].append(bytes(data))
                self._state.notify_all()

    def _copy(self, data: bytes, into: memoryview, tag: int) -> None:
        if len(data) != len(into):
            raise LinkError(
                f"rank {self.peer} sent {len(data)} bytes where {len(into)} were expected"
            )
        into[:] = data

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        _close(self.sock)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
