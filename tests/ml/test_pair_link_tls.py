"""The direct link between two ranks on worlds wired as the platform wires them: TLS 1.3 between
the parties, each end proving its party with its certificate of the attempt, and strangers at
end 0's listener that cannot keep end 1 out."""

from __future__ import annotations

import hashlib
import socket
import ssl
import struct
import threading
from typing import Any

import pytest
import torch

from tessera_ml.comm import pair_link as link
from tessera_ml.comm.mesh import MeshCommunicator
from tessera_ml.comm.pair_link import TOKEN_BYTES, link_encrypted, open_link
from tessera_ml.comm.peer import CommPeer, DirectPeer
from tessera_ml.security.tls import peer_identity
from tessera_ml.worlds import run_world

from .test_pair_link import _messages

WAIT_S = 60.0
"""A bound on the strangers' reads, so a broken test fails instead of hanging."""


def _wire(tensors: list[torch.Tensor]) -> bytes:
    """One round's message as the link frames it: length, then every tensor's bytes."""
    payload = b"".join(
        t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() for t in tensors
    )
    return struct.pack("<q", len(payload)) + payload


def _secure_swap(comm: MeshCommunicator) -> dict[str, Any]:
    tapped: list[tuple[int, str]] = []
    comm.tap = lambda peer, payload: tapped.append((peer, hashlib.sha256(payload).hexdigest()))
    other = 1 - comm.rank
    peer, fell_back = open_link(comm, comm.rank, other, "direct")
    tapped.clear()  # what the communicator carried while the link was made
    try:
        assert isinstance(peer, DirectPeer) and isinstance(peer.sock, ssl.SSLSocket)
        mine = _messages(comm.rank)
        received = [peer.exchange(*tensors) for tensors in mine]
        identity = peer_identity(peer.sock)
        return {
            "fell_back": fell_back,
            "version": peer.sock.version(),
            "peer_party": identity.party,
            "same_attempt": identity.attempt == comm.tls.attempt if comm.tls else False,
            "encrypted": link_encrypted(comm, peer),
            "equal": [
                all(torch.equal(g, e) for g, e in zip(got, sent, strict=True))
                for got, sent in zip(received, _messages(other), strict=True)
            ],
            "tapped_all": tapped
            == [(other, hashlib.sha256(_wire(tensors)).hexdigest()) for tensors in mine],
        }
    finally:
        peer.close()


def test_between_parties_the_link_is_tls_13_with_the_other_compute_party() -> None:
    out = run_world(_secure_swap, 2, parties=["alice", "bob"])
    for rank, party in ((0, "bob"), (1, "alice")):
        assert out[rank]["fell_back"] is None
        assert out[rank]["version"] == "TLSv1.3"
        assert out[rank]["peer_party"] == party
        assert out[rank]["same_attempt"]
        assert out[rank]["encrypted"]
        # mixed dtypes, and a round of 16 MB each way, past both sockets' buffers
        assert out[rank]["equal"] == [True, True, True]
        # the communicator's tap saw each message's plaintext, as it was sent
        assert out[rank]["tapped_all"]


def _closed(sock: socket.socket) -> bool:
    """Whether the other end closed ``sock`` (read until it does, or until ``WAIT_S``)."""
    sock.settimeout(WAIT_S)
    try:
        while sock.recv(1024):
            pass
    except TimeoutError:
        return False
    except OSError:  # reset, or a TLS alert
        return True
    return True


def _strangers_first(comm: MeshCommunicator) -> dict[str, Any]:
    """Rank 2, a stranger, connects to party 0's listener before party 1 knows where it is:
    once silent, once with garbage, once over TLS with its own certificate of this attempt
    presenting a wrong token. Ranks 0 and 1 then make the link and exchange."""
    if comm.rank == 2:
        return _stranger(comm)
    if comm.rank == 0:
        listen = link.listen

        def listen_and_wait_for_strangers(host: str) -> socket.socket:
            listener = listen(host)
            comm.send_data(listener.getsockname()[:2], 2)
            comm.recv_data(2)  # the strangers are in the listener's queue
            return listener

        link.listen = listen_and_wait_for_strangers
    peer, fell_back = open_link(comm, comm.rank, 1 - comm.rank, "direct")
    try:
        (theirs,) = peer.exchange(torch.tensor([10 + comm.rank]))
        out = {
            "kind": type(peer).__name__,
            "fell_back": fell_back,
            "theirs": int(theirs),
            "encrypted": link_encrypted(comm, peer),
        }
    finally:
        peer.close()
    if comm.rank == 0:
        comm.send_data("done", 2)
    return out


def _stranger(comm: MeshCommunicator) -> dict[str, Any]:
    assert comm.tls is not None
    address = tuple(comm.recv_data(0))
    silent = socket.create_connection(address)
    garbage = socket.create_connection(address)
    garbage.sendall(b"GET / HTTP/1.1\r\nHost: tessera\r\n\r\n" * 4)
    raw = socket.create_connection(address)
    comm.send_data("queued", 0)
    # party 0 handles each connection in a thread of its own, so this handshake completes
    # (or is refused) while the silent connection still waits
    handshake: dict[str, Any] = {}

    def secure() -> None:
        try:
            tls = comm.tls.client.wrap_socket(raw)  # type: ignore[union-attr]
            tls.sendall(bytes(TOKEN_BYTES))
            handshake["sock"] = tls
        except (OSError, ssl.SSLError) as exc:
            handshake["refused"] = repr(exc)

    thread = threading.Thread(target=secure)
    thread.start()
    assert comm.recv_data(0) == "done"
    thread.join(WAIT_S)
    result = {"silent_closed": _closed(silent), "garbage_closed": _closed(garbage)}
    result["tls_closed"] = "refused" in handshake or _closed(handshake["sock"])
    for s in (silent, garbage, handshake.get("sock", raw)):
        s.close()
    return result


@pytest.mark.parametrize(
    "stranger",
    [
        pytest.param("carol", id="wrong-party-certificate"),
        pytest.param("bob", id="right-party-wrong-token"),
    ],
)
def test_strangers_at_the_listener_do_not_keep_party_1_out(stranger: str) -> None:
    out = run_world(_strangers_first, 3, parties=["alice", "bob", stranger])
    assert [o["kind"] for o in out[:2]] == [DirectPeer.__name__] * 2
    assert [o["fell_back"] for o in out[:2]] == [None, None]
    assert [o["theirs"] for o in out[:2]] == [11, 10]
    assert all(o["encrypted"] for o in out[:2])
    # party 0 closed every stranger's connection
    assert out[2] == {"silent_closed": True, "garbage_closed": True, "tls_closed": True}


def _impostor_listener(comm: MeshCommunicator) -> dict[str, Any]:
    """Party 1 is told to connect where rank 2 (carol) listens instead of party 0: it must
    refuse carol's certificate and fall back to the communicator, as must party 0."""
    assert comm.tls is not None
    if comm.rank == 2:
        listener = socket.create_server((link.local_address(None), 0))
        comm.send_data(listener.getsockname()[:2], 0)
        raw, _ = listener.accept()
        try:
            tls = comm.tls.accept(raw, timeout_s=WAIT_S)
            closed = _closed(tls)
        except (OSError, ssl.SSLError):
            closed = True
        listener.close()
        return {"closed": closed}
    if comm.rank == 0:
        host, port = comm.recv_data(2)
        address = struct.unpack("!I", socket.inet_aton(host))[0]
        token = struct.unpack("<2q", bytes(range(TOKEN_BYTES)))
        comm.send(torch.tensor([address, port, *token], dtype=torch.int64), 1)
        verdict = torch.empty(1, dtype=torch.int64)
        comm.recv(verdict, 1)
        comm.send(torch.zeros(1, dtype=torch.int64), 1)
        peer: Any = CommPeer(comm=comm, other=1)
        fell_back = None if int(verdict) == 0 else "party 1 says it connected"
    else:
        peer, fell_back = open_link(comm, 1, 0, "direct")
    (theirs,) = peer.exchange(torch.tensor([10 + comm.rank]))
    return {"kind": type(peer).__name__, "fell_back": fell_back, "theirs": int(theirs)}


def test_party_1_refuses_a_listener_with_another_partys_certificate() -> None:
    out = run_world(_impostor_listener, 3, parties=["alice", "bob", "carol"])
    assert out[0] == {"kind": CommPeer.__name__, "fell_back": None, "theirs": 11}
    assert out[1]["kind"] == CommPeer.__name__
    assert "certificate of party 'carol', not 'alice'" in out[1]["fell_back"]
    assert out[1]["theirs"] == 10
    assert out[2] == {"closed": True}
