"""Ports held from the moment they are chosen: a store's port is published before the rank that
serves it starts, and a port that was only looked up could be taken in between.

Imports without torch, so a worker reserves the port without loading it.
"""

from __future__ import annotations

import socket


def reserve_port(host: str = "127.0.0.1") -> socket.socket:
    """A TCP socket bound to a free port of ``host`` and not yet listening: the port is this
    socket's until it is closed, so no other socket (an outgoing connection's ephemeral port
    included) can take it, while a peer that connects early is refused and retries as it would
    before the server starts. The process that serves on it listens (``listen()``) on this
    socket or on a copy of its descriptor."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
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
    server, a testbed world's store inside its namespace); nothing keeps it free meanwhile."""
    with reserve_port(host) as sock:
        return port_of(sock)
