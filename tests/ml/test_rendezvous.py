"""The attempt's store and the TLS checks: strangers learn and change nothing."""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tessera_ml.comm.rendezvous import StoreClient, StoreError, StoreServer
from tessera_ml.ports import port_of, reserve_port
from tessera_ml.security.pki import Authority, Credentials, Identity, issue_credentials
from tessera_ml.security.tls import PeerRefused, TlsConfig

ATTEMPT = "attempt-1"


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority.create("test CA")


def tls_for(authority: Authority, folder: Path, party: str, attempt: str = ATTEMPT) -> TlsConfig:
    credentials = issue_credentials(authority, Identity(party, attempt), folder / party / attempt)
    return TlsConfig(credentials, attempt=ATTEMPT)


@pytest.fixture
def served(authority: Authority, tmp_path: Path) -> Iterator[tuple[StoreServer, bytes]]:
    secret = os.urandom(32)
    server = StoreServer("127.0.0.1", 0, tls_for(authority, tmp_path, "alice"), secret)
    yield server, secret
    server.close()


def client(server: StoreServer, tls: TlsConfig, secret: bytes) -> StoreClient:
    return StoreClient(server.address, "alice", tls, secret, timeout=timedelta(seconds=2))


def test_members_of_the_attempt_share_keys(
    served: tuple[StoreServer, bytes], authority: Authority, tmp_path: Path
) -> None:
    server, secret = served
    alice = client(server, tls_for(authority, tmp_path, "alice"), secret)
    bob = client(server, tls_for(authority, tmp_path, "bob"), secret)

    alice.set("endpoint/0", b"10.0.0.1:4000")
    assert bob.get("endpoint/0") == b"10.0.0.1:4000"
    assert bob.add("count", 2) == 2 and alice.add("count", 3) == 5
    assert bob.check(["endpoint/0", "count"]) and not bob.check(["missing"])
    assert alice.num_keys() == 2
    with pytest.raises(TimeoutError):
        bob.get("missing")
    alice.close()
    bob.close()


def closed_without_answer(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True


def _refused(server: StoreServer, before: int, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while server.refused <= before and time.monotonic() < deadline:
        time.sleep(0.02)
    return server.refused > before


def test_a_store_serves_on_its_reserved_port_and_members_that_came_early_get_in(
    authority: Authority, tmp_path: Path
) -> None:
    secret = os.urandom(32)
    listener = reserve_port("127.0.0.1")
    address = ("127.0.0.1", port_of(listener))
    with pytest.raises(OSError):  # reserved: no other server can take the port meanwhile
        socket.create_server(address)
    joined: list[StoreClient] = []
    early = threading.Thread(
        target=lambda: joined.append(
            StoreClient(
                address,
                "alice",
                tls_for(authority, tmp_path, "bob"),
                secret,
                timeout=timedelta(seconds=10),
            )
        )
    )
    early.start()
    time.sleep(0.5)  # the member knocks before the store listens, and is refused until it does
    server = StoreServer(*address, tls_for(authority, tmp_path, "alice"), secret, listener)
    try:
        early.join(15)
        assert server.address == address and len(joined) == 1
        joined[0].set("k", b"v")
        assert client(server, tls_for(authority, tmp_path, "alice"), secret).get("k") == b"v"
        joined[0].close()
    finally:
        server.close()


def test_a_member_without_the_secret_learns_and_changes_nothing(
    served: tuple[StoreServer, bytes], authority: Authority, tmp_path: Path
) -> None:
    server, secret = served
    member = client(server, tls_for(authority, tmp_path, "alice"), secret)
    member.set("plan", b"kept")

    intruder = client(server, tls_for(authority, tmp_path, "bob"), os.urandom(32))
    with pytest.raises((StoreError, ConnectionError)):
        intruder.set("plan", b"changed")
    with pytest.raises((StoreError, ConnectionError)):
        intruder.num_keys()

    assert server.refused >= 1
    assert member.get("plan") == b"kept" and member.num_keys() == 1


def test_a_partys_own_store_serves_that_party_only(authority: Authority, tmp_path: Path) -> None:
    """Another party's rank of the same attempt, holding the secret, is refused at its
    certificate: it can neither read nor rewrite where the party's process group meets."""
    secret = os.urandom(32)
    server = StoreServer(
        "127.0.0.1", 0, tls_for(authority, tmp_path, "alice"), secret, party="alice"
    )
    try:
        member = client(server, tls_for(authority, tmp_path, "alice"), secret)
        member.set("party/alice/0", b"10.0.0.1:4000")
        other = client(server, tls_for(authority, tmp_path, "bob"), secret)
        with pytest.raises((StoreError, ConnectionError)):
            other.set("party/alice/0", b"10.6.6.6:4000")
        assert _refused(server, 0)
        assert member.get("party/alice/0") == b"10.0.0.1:4000"
        member.close()
    finally:
        server.close()


def test_strangers_are_closed_without_a_word_while_members_go_on(
    served: tuple[StoreServer, bytes], authority: Authority, tmp_path: Path
) -> None:
    server, secret = served
    member = client(server, tls_for(authority, tmp_path, "alice"), secret)
    member.set("k", b"v")

    silent = socket.create_connection(server.address)  # connects and says nothing
    before = server.refused
    plain = socket.create_connection(server.address)
    plain.sendall(b"\x00\x00\x00\x05\x08hello")  # a store request without TLS
    assert closed_without_answer(plain)
    assert _refused(server, before)
    other_ca = Authority.create("someone else's CA")
    outsider = client(server, tls_for(other_ca, tmp_path / "x", "alice"), secret)
    with pytest.raises((StoreError, ssl.SSLError, ConnectionError)):
        outsider.get("k")
    old = client(server, tls_for(authority, tmp_path / "old", "alice", "attempt-0"), secret)
    with pytest.raises((StoreError, ConnectionError)):
        old.get("k")

    assert member.get("k") == b"v" and member.num_keys() == 1  # while the silent one waits
    silent.close()
    plain.close()


def _serve_once(tls: TlsConfig, listener: socket.socket, errors: list[BaseException]) -> None:
    sock, _ = listener.accept()
    try:
        with tls.accept(sock, timeout_s=5):
            pass
    except BaseException as exc:
        errors.append(exc)


def test_a_certificate_of_one_party_is_refused_where_another_is_expected(
    authority: Authority, tmp_path: Path
) -> None:
    server_tls = tls_for(authority, tmp_path, "bob")
    listener = socket.create_server(("127.0.0.1", 0))
    errors: list[BaseException] = []
    thread = threading.Thread(target=_serve_once, args=(server_tls, listener, errors))
    thread.start()

    with pytest.raises(PeerRefused, match="party 'bob', not 'carol'"):
        tls_for(authority, tmp_path, "alice").connect(
            listener.getsockname()[:2], "carol", timeout_s=5
        )
    thread.join(5)
    listener.close()


def test_credentials_are_private_to_their_owner(authority: Authority, tmp_path: Path) -> None:
    credentials = issue_credentials(authority, Identity("alice", ATTEMPT), tmp_path / "c")
    assert isinstance(credentials, Credentials)
    assert credentials.key.stat().st_mode & 0o077 == 0
