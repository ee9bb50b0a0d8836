"""``free_port``: ports a test's server binds itself, drawn where no outgoing connection goes."""

from __future__ import annotations

import socket

import pytest

from tessera_ml import ports


def test_ports_come_from_below_the_ephemeral_range_and_are_never_handed_out_twice() -> None:
    low, _ = ports._ephemeral_range()
    if low - ports._FIRST_UNPRIVILEGED < 1000:
        pytest.skip(f"the ephemeral range starts at {low}: nothing lies below it")
    drawn = [ports.free_port() for _ in range(200)]
    assert all(ports._FIRST_UNPRIVILEGED <= p < low for p in drawn)
    assert len(set(drawn)) == len(drawn)
    with socket.socket() as server:  # each is free: a server binds it
        server.bind(("127.0.0.1", drawn[-1]))
        server.listen()


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        # a range whose only port below it is the taken one
        monkeypatch.setattr(ports, "_ephemeral_range", lambda: (port + 1, 65535))
        monkeypatch.setattr(ports, "_BELOW_EPHEMERAL", 1)
        got = ports.free_port()
    assert got != port


def test_without_room_below_the_range_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_ephemeral_range", lambda: (1024, 65535))
    got = ports.free_port()
    assert 1024 <= got <= 65535
    with socket.socket() as server:
        server.bind(("127.0.0.1", got))


def test_an_unreadable_range_leaves_the_choice_to_the_kernel() -> None:
    assert ports._ephemeral_range("/nonexistent/ip_local_port_range") == (1024, 65535)


def test_a_port_the_kernel_picked_is_not_handed_out_twice_either(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ports, "_ephemeral_range", lambda: (1024, 65535))
    drawn = [ports.free_port() for _ in range(50)]
    assert len(set(drawn)) == len(drawn)


def test_an_ipv6_host_gets_a_port_of_its_own_family() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    port = ports.free_port("::1")
    with socket.socket(socket.AF_INET6) as server:
        server.bind(("::1", port))
