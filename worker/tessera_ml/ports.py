"""Ports held from the moment they are chosen: a store's port is published before the rank that
serves it starts, and a port that was only looked up could be taken in between.

Imports without torch, so a worker reserves the port without loading it.
"""

from __future__ import annotations

import random
import socket
import threading


def reserve_port(host: str = "127.0.0.1") -> socket.socket:
    """A TCP socket bound to a free port of ``host`` and not yet listening: the port is this
    socket's until it is closed, so no other socket (an outgoing connection's ephemeral port
    included) can take it, while a peer that connects early is refused and retries as it would
    before the server starts. The process that serves on it listens (``listen()``) on this
    socket or on a copy of its descriptor."""
    return _bound(host, 0)


def _bound(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        # no SO_REUSEADDR: with it on both sides Linux lets a second socket bind a port that no
        # socket listens on yet
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def port_of(sock: socket.socket) -> int:
    return int(sock.getsockname()[1])


def free_port(host: str = "127.0.0.1") -> int:
    """A port free at the moment of asking, for a server that binds it itself soon after (a test's
    server, a testbed world's store inside its namespace). Nothing holds it meanwhile, so it is
    drawn below the kernel's ephemeral range where that leaves room: an outgoing connection's
    local port, which the kernel picks from that range, cannot take it before the server binds
    it. A port is not handed out twice by one process."""
    low, _ = _ephemeral_range()
    candidates = range(max(_FIRST_UNPRIVILEGED, low - _BELOW_EPHEMERAL), low)
    with _handing_out:
        for _ in range(min(len(candidates), 64)):
            port = random.choice(candidates)
            if port in _handed_out:
                continue
            try:
                _bound(host, port).close()
            except OSError:
                continue
            _handed_out.add(port)
            return port
        while True:  # no room below the range, or none free there: the kernel picks
            with reserve_port(host) as sock:
                port = port_of(sock)
            if port not in _handed_out:
                _handed_out.add(port)
                return port


_FIRST_UNPRIVILEGED = 1024
_BELOW_EPHEMERAL = 16384
_handed_out: set[int] = set()
_handing_out = threading.Lock()


def _ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    try:
        with open(path) as f:
            low, high = (int(v) for v in f.read().split())
    except (OSError, ValueError):
        return _FIRST_UNPRIVILEGED, 65535  # unknown: nothing lies below it, bind(0) decides
    return low, high
