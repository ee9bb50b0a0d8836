"""The rendezvous store of one attempt: closed to strangers, encrypted between parties.

One rank (rank 0) serves the store on its worker's advertised address. A client must complete
mutually authenticated TLS with a certificate of the same attempt and then present the
attempt's secret, which the control plane gives only to that attempt's workers; any other
connection is closed before it can read or write a key. The client is a
``torch.distributed.Store``, so process groups (gloo, NCCL) rendezvous through it as through
a ``TCPStore``.

Wire format (after the handshake): each request is a frame ``u32 length`` + ``u8 op`` + items,
each item ``u32 length`` + bytes; the reply is a frame ``u8 status`` + items.
"""

from __future__ import annotations

import contextlib
import hmac
import socket
import ssl
import struct
import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch.distributed as dist

from tessera_ml.security.tls import PeerRefused, TlsConfig

SECRET_BYTES = 32
HANDSHAKE_TIMEOUT_S = 10.0
MAX_FRAME = 64 << 20

_U32 = struct.Struct("!I")
_I64 = struct.Struct("!q")
(HELLO, SET, GET, ADD, COMPARE_SET, WAIT, CHECK, DELETE, NUM_KEYS) = range(9)
OK, TIMEOUT, REFUSED = 0, 1, 2


class StoreError(RuntimeError):
    """The store refused a request or could not be reached."""


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("the store connection closed")
        got += k
    return bytes(buf)


def _frame(head: int, items: Sequence[bytes]) -> bytes:
    body = bytes([head]) + b"".join(_U32.pack(len(i)) + i for i in items)
    return _U32.pack(len(body)) + body


def _read_frame(sock: socket.socket) -> tuple[int, list[bytes]]:
    (length,) = _U32.unpack(_read_exact(sock, 4))
    if not 1 <= length <= MAX_FRAME:
        raise ConnectionError(f"a store frame of {length} bytes is not valid")
    body = _read_exact(sock, length)
    items: list[bytes] = []
    at = 1
    while at < length:
        if at + 4 > length:
            raise ConnectionError("a truncated store frame")
        (n,) = _U32.unpack_from(body, at)
        at += 4
        if at + n > length:
            raise ConnectionError("a truncated store frame")
        items.append(body[at : at + n])
        at += n
    return body[0], items


def _as_bytes(value: str | bytes | bytearray | Sequence[int]) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


class StoreServer:
    """Serves one attempt's keys to the clients that prove they belong to it."""

    def __init__(
        self,
        host: str,
        port: int,
        tls: TlsConfig,
        secret: bytes,
        listener: socket.socket | None = None,
        party: str | None = None,
    ) -> None:
        """Serve at ``(host, port)``, or on ``listener``, a socket already bound there
        (``tessera_ml.ports.reserve_port``), which the store then owns. ``party``: serve only
        clients whose certificate names that party (a party's own store)."""
        if len(secret) != SECRET_BYTES:
            if listener is not None:
                listener.close()
            raise ValueError(f"the store secret must be {SECRET_BYTES} bytes")
        self._tls = tls
        self._secret = secret
        self._party = party
        self._data: dict[str, bytes] = {}
        self._changed = threading.Condition()
        self._closed = threading.Event()
        self.refused = 0
        """Connections closed for want of a certificate of this attempt or of the secret."""
        if listener is None:
            self._listener = socket.create_server((host, port), backlog=64)
        else:
            self._listener = listener
            listener.listen(64)
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._thread = threading.Thread(target=self._accept_loop, name="store", daemon=True)
        self._thread.start()

    def keys(self) -> list[str]:
        """The keys it holds now."""
        with self._changed:
            return sorted(self._data)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._changed:
            self._changed.notify_all()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            tls = self._tls.accept(sock, HANDSHAKE_TIMEOUT_S)
            if self._party is not None:
                try:
                    self._tls.expect(tls, self._party)
                except PeerRefused:
                    tls.close()
                    raise
        except (OSError, ssl.SSLError, PeerRefused):
            self.refused += 1
            sock.close()
            return
        with tls:
            try:
                op, items = _read_frame(tls)
                if (
                    op != HELLO
                    or len(items) != 1
                    or not hmac.compare_digest(items[0], self._secret)
                ):
                    self.refused += 1
                    return
                tls.settimeout(None)
                tls.sendall(_frame(OK, []))
                while not self._closed.is_set():
                    op, items = _read_frame(tls)
                    status, reply = self._handle(op, items)
                    tls.sendall(_frame(status, reply))
            except (OSError, ssl.SSLError, ConnectionError, struct.error, ValueError):
                return

    def _handle(self, op: int, items: list[bytes]) -> tuple[int, list[bytes]]:
        key_items = {WAIT: len(items) - 1, CHECK: len(items)}.get(op, 1)
        keys = [i.decode() for i in items[:key_items]]
        with self._changed:
            if op == SET:
                self._data[keys[0]] = items[1]
                self._changed.notify_all()
                return OK, []
            if op == GET:
                (timeout_ms,) = _I64.unpack(items[1])
                if not self._wait_for([keys[0]], timeout_ms):
                    return TIMEOUT, []
                return OK, [self._data[keys[0]]]
            if op == ADD:
                (delta,) = _I64.unpack(items[1])
                value = int(self._data.get(keys[0], b"0")) + delta
                self._data[keys[0]] = str(value).encode()
                self._changed.notify_all()
                return OK, [_I64.pack(value)]
            if op == COMPARE_SET:
                current = self._data.get(keys[0])
                expected, desired = items[1], items[2]
                if current is None and expected == b"":
                    self._data[keys[0]] = desired
                    self._changed.notify_all()
                    return OK, [desired]
                if current is not None and current == expected:
                    self._data[keys[0]] = desired
                    self._changed.notify_all()
                    return OK, [desired]
                return OK, [current if current is not None else expected]
            if op == WAIT:
                (timeout_ms,) = _I64.unpack(items[-1])
                return (OK if self._wait_for(keys, timeout_ms) else TIMEOUT), []
            if op == CHECK:
                return OK, [b"1" if all(k in self._data for k in keys) else b"0"]
            if op == DELETE:
                existed = self._data.pop(keys[0], None) is not None
                return OK, [b"1" if existed else b"0"]
            if op == NUM_KEYS:
                return OK, [_I64.pack(len(self._data))]
        return REFUSED, [b"unknown operation"]

    def _wait_for(self, keys: list[str], timeout_ms: int) -> bool:
        deadline = time.monotonic() + timeout_ms / 1000
        while not all(k in self._data for k in keys):
            left = deadline - time.monotonic()
            if left <= 0 or self._closed.is_set():
                return False
            self._changed.wait(left)
        return True


class StoreClient(dist.Store):
    """A ``torch.distributed.Store`` over one attempt's ``StoreServer``; one connection per
    thread, so a thread blocked in ``get`` never holds up another's ``set``."""

    def __init__(
        self,
        address: tuple[str, int],
        party: str,
        tls: TlsConfig,
        secret: bytes,
        timeout: timedelta = timedelta(seconds=300),
    ) -> None:
        super().__init__()
        self._address = address
        self._party = party
        self._tls = tls
        self._secret = secret
        self._timeout_s = timeout.total_seconds()
        self._local = threading.local()
        self._all: list[ssl.SSLSocket] = []
        self._lock = threading.Lock()

    # -- connection ------------------------------------------------------------------------
    def _connection(self) -> ssl.SSLSocket:
        sock: ssl.SSLSocket | None = getattr(self._local, "sock", None)
        if sock is not None:
            return sock
        deadline = time.monotonic() + self._timeout_s
        while True:
            try:
                sock = self._tls.connect(self._address, self._party, HANDSHAKE_TIMEOUT_S)
                break
            except (ConnectionRefusedError, TimeoutError, ssl.SSLError) as exc:
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"cannot reach the rendezvous store at {self._address}: {exc}"
                    ) from exc
                time.sleep(0.1)
        sock.settimeout(None)
        sock.sendall(_frame(HELLO, [self._secret]))
        status, _ = _read_frame(sock)
        if status != OK:
            sock.close()
            raise StoreError("the rendezvous store refused this client")
        self._local.sock = sock
        with self._lock:
            self._all.append(sock)
        return sock

    def _call(self, op: int, items: Sequence[bytes]) -> list[bytes]:
        sock = self._connection()
        sock.sendall(_frame(op, items))
        status, reply = _read_frame(sock)
        if status == TIMEOUT:
            raise TimeoutError(f"the rendezvous store timed out after {self._timeout_s:g} s")
        if status != OK:
            raise StoreError(reply[0].decode() if reply else "the store refused the request")
        return reply

    def close(self) -> None:
        with self._lock:
            for sock in self._all:
                with contextlib.suppress(OSError):
                    sock.close()
            self._all.clear()

    def _timeout_ms(self, timeout: Any = None) -> bytes:
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else self._timeout_s
        return _I64.pack(int(seconds * 1000))

    # -- the torch.distributed.Store interface ---------------------------------------------
    def set(self, key: str, value: Any) -> None:
        self._call(SET, [key.encode(), _as_bytes(value)])

    def get(self, key: str) -> bytes:
        return self._call(GET, [key.encode(), self._timeout_ms()])[0]

    def add(self, key: str, value: int) -> int:
        return int(_I64.unpack(self._call(ADD, [key.encode(), _I64.pack(value)])[0])[0])

    def compare_set(self, key: str, expected: Any, desired: Any) -> bytes:
        items = [key.encode(), _as_bytes(expected), _as_bytes(desired)]
        return self._call(COMPARE_SET, items)[0]

    def wait(self, keys: list[str], timeout: Any = None) -> None:
        self._call(WAIT, [*(k.encode() for k in keys), self._timeout_ms(timeout)])

    def check(self, keys: list[str]) -> bool:
        return self._call(CHECK, [k.encode() for k in keys])[0] == b"1"

    def delete_key(self, key: str) -> bool:
        return self._call(DELETE, [key.encode()])[0] == b"1"

    def num_keys(self) -> int:
        return int(_I64.unpack(self._call(NUM_KEYS, [])[0])[0])

    def set_timeout(self, timeout: timedelta) -> None:
        self._timeout_s = timeout.total_seconds()
