"""The direct link between two ranks (`comm/pair_link.py`), on real gloo worlds of two ranks."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
import torch

from tessera_ml.comm.base import Communicator
from tessera_ml.comm.pair_link import (
    TOKEN_BYTES,
    both_succeeded,
    dial,
    local_address,
    open_link,
    receive_endpoint,
)
from tessera_ml.comm.peer import CommPeer, DirectPeer
from tessera_ml.worlds import run_world


def _messages(rank: int) -> list[list[torch.Tensor]]:
    """Each round's tensors from ``rank``: mixed dtypes and shapes (the second round's
    tensors after its 7 bytes lie off their dtype's alignment in the message), and one round
    of 16 MB each way, more than the sockets buffer, so both parties send while the other does
    too."""
    gen = torch.Generator().manual_seed(rank)
    return [
        [torch.randint(-(2**62), 2**62, (3, 5), generator=gen)],
        [
            torch.randint(-(2**31), 2**31 - 1, (64, 64), generator=gen, dtype=torch.int32),
            torch.randint(0, 2, (7,), generator=gen, dtype=torch.uint8),
            torch.zeros(0, dtype=torch.int64),
            torch.randint(-(2**62), 2**62, (3,), generator=gen),
            torch.randn(2, 3, generator=gen).to(torch.bfloat16),
            torch.randint(0, 2, (5,), generator=gen).bool(),
            torch.randn((), generator=gen, dtype=torch.float64),
        ],
        [torch.randint(-(2**62), 2**62, (2_000_000,), generator=gen)],
    ]


def _swap_all(comm: Communicator, link: str) -> dict[str, Any]:
    peer, fell_back = open_link(comm, comm.rank, 1 - comm.rank, link)
    try:
        received = [peer.exchange(*tensors) for tensors in _messages(comm.rank)]
        peer.barrier()
        expected = _messages(1 - comm.rank)
        equal = [
            [torch.equal(g, e) for g, e in zip(got, sent, strict=True)]
            for got, sent in zip(received, expected, strict=True)
        ]
        # the tensors of a round share no memory: overwriting one leaves the others as sent
        for t in received[1][::2]:
            t.fill_(1)
        kept = zip(received[1][1::2], expected[1][1::2], strict=True)
        apart = all(torch.equal(g, e) for g, e in kept)
        return {
            "apart": apart,
            "aligned": all(t.data_ptr() % t.element_size() == 0 for r in received for t in r),
            "shapes": [[t.shape for t in r] for r in received],
            "kind": type(peer).__name__,
            "fell_back": fell_back,
            "dtypes": [[t.dtype for t in r] for r in received],
            "equal": equal,
            "stats": peer.stats.snapshot(),
        }
    finally:
        peer.close()


@pytest.mark.parametrize("link", ["direct", "communicator"])
def test_each_party_receives_exactly_what_the_other_sent(link: str) -> None:
    out = run_world(_swap_all, 2, link)
    assert [o["kind"] for o in out] == (
        [DirectPeer.__name__] * 2 if link == "direct" else [CommPeer.__name__] * 2
    )
    for rank in (0, 1):
        assert out[rank]["fell_back"] is None
        assert out[rank]["dtypes"] == [[t.dtype for t in r] for r in _messages(1 - rank)]
        assert out[rank]["shapes"] == [[t.shape for t in r] for r in _messages(1 - rank)]
        assert out[rank]["equal"] == [[True], [True] * 7, [True]]
        assert out[rank]["apart"] and out[rank]["aligned"]
    # three rounds; the barrier is not one
    assert out[0]["stats"] == out[1]["stats"]
    assert out[0]["stats"][1] == 3


def _out_of_step(comm: Communicator) -> str:
    peer, _ = open_link(comm, comm.rank, 1 - comm.rank, "direct")
    try:
        peer.exchange(torch.zeros(4 if comm.rank == 0 else 5, dtype=torch.int64))
    except (RuntimeError, ConnectionError) as exc:
        return str(exc)
    finally:
        peer.close()
    return "no error"


def test_parties_out_of_step_are_told_so_instead_of_hanging() -> None:
    errors = run_world(_out_of_step, 2, timeout_s=60)
    # the party expecting fewer bytes sees the other's length; the other sees the link close
    assert "the two ends of the link are out of step" in errors
    assert all(e != "no error" for e in errors)


def _late_other(comm: Communicator, spin_s: float) -> int:
    """Party 1 answers 50 ms late; party 0's sleeps in ``poll`` during that round."""
    peer, _ = open_link(comm, comm.rank, 1 - comm.rank, "direct", spin_s=spin_s)
    try:
        peer.barrier()
        before = peer.stats.sleeps
        if comm.rank == 1:
            time.sleep(0.05)
        (theirs,) = peer.exchange(torch.tensor([comm.rank]))
        assert int(theirs) == 1 - comm.rank
        return peer.stats.sleeps - before
    finally:
        peer.close()


def test_a_party_retries_for_its_spin_time_before_it_sleeps() -> None:
    waited, _ = run_world(_late_other, 2, 0.0)
    spun, _ = run_world(_late_other, 2, 1.0)
    assert waited >= 1  # no retrying: party 0 sleeps until the late message wakes it
    assert spun == 0  # retrying for up to a second: the message arrives meanwhile


def _one_round(comm: Communicator, interface: str | None) -> dict[str, Any]:
    """One exchange over the link end 0 makes listening on ``interface`` (None: the default)."""
    peer, fell_back = open_link(comm, comm.rank, 1 - comm.rank, "direct", interface=interface)
    try:
        (theirs,) = peer.exchange(torch.tensor([comm.rank]))
        return {"kind": type(peer).__name__, "fell_back": fell_back, "theirs": int(theirs)}
    finally:
        peer.close()


def test_without_a_direct_link_both_parties_fall_back_to_the_communicator() -> None:
    # party 0 listens on an interface that does not exist: both fall back, with the reason
    out = run_world(_one_round, 2, "nosuch0", timeout_s=60)
    assert [o["kind"] for o in out] == [CommPeer.__name__] * 2
    assert "nosuch0" in out[0]["fell_back"]
    assert "cannot listen" in out[1]["fell_back"]
    assert [o["theirs"] for o in out] == [1, 0]


def _stranger_first(comm: Communicator) -> dict[str, Any]:
    """Rank 1 lets two strangers connect before it: one presents a wrong token, one nothing and
    hangs up; then it dials with the right token and reports as ``open_link`` would."""
    if comm.rank == 0:
        peer, fell_back = open_link(comm, 0, 1, "direct")
    else:
        endpoint = receive_endpoint(comm, 0)
        assert endpoint is not None
        host, port, token = endpoint
        wrong = dial(host, port, bytes(TOKEN_BYTES), 5.0)
        silent = socket.create_connection((host, port), timeout=5.0)
        silent.close()
        sock = dial(host, port, token, 5.0)
        assert both_succeeded(comm, 0, ok=True)
        peer, fell_back = DirectPeer(sock=sock), None
    try:
        out: dict[str, Any] = {"kind": type(peer).__name__, "fell_back": fell_back}
        (theirs,) = peer.exchange(torch.tensor([10 + comm.rank]))
        out["theirs"] = int(theirs)
        if comm.rank == 1:
            # party 0 closed the stranger's connection
            wrong.settimeout(5.0)
            out["stranger_read"] = wrong.recv(1)
            wrong.close()
        return out
    finally:
        peer.close()


def test_a_connection_without_the_token_is_closed_and_the_party_still_connects() -> None:
    out = run_world(_stranger_first, 2, timeout_s=60)
    assert [o["kind"] for o in out] == [DirectPeer.__name__] * 2
    assert [o["fell_back"] for o in out] == [None, None]
    assert [o["theirs"] for o in out] == [11, 10]
    assert out[1]["stranger_read"] == b""


def test_local_address_names_the_interface_or_refuses() -> None:
    assert local_address("lo") == "127.0.0.1"
    with pytest.raises(OSError, match="nosuch0"):
        local_address("nosuch0")


def test_an_unknown_link_is_refused() -> None:
    with pytest.raises(ValueError, match="link is one of direct, communicator"):
        open_link(None, 0, 1, "carrier-pigeon")  # type: ignore[arg-type]


def test_a_link_between_parties_listens_where_the_mesh_does_not_on_gloos_interface() -> None:
    """gloo's interface serves a party's own process group (loopback where the party is all
    in one task); another party reaches a rank where its mesh accepts their links."""
    for host in ("127.0.0.1", "localhost"):  # a worker's --address may be a name
        out = run_world(
            _one_round,
            2,
            None,
            parties=["alice", "bob"],
            host=host,
            env={"GLOO_SOCKET_IFNAME": "nosuch0"},
            timeout_s=60,
        )
        assert [(o["kind"], o["fell_back"]) for o in out] == [(DirectPeer.__name__, None)] * 2
        assert [o["theirs"] for o in out] == [1, 0]
