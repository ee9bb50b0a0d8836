"""The platform's communicator: each party on gloo, TLS between parties, gloo's results."""

from __future__ import annotations

import ssl
from typing import Any

import torch

from tessera_ml.comm.base import MAX_DATA_BYTES, Communicator, ReduceOp
from tessera_ml.comm.codec import DecodeError
from tessera_ml.comm.mesh import MeshCommunicator
from tessera_ml.security.tls import peer_identity
from tessera_ml.worlds import run_world

PARTIES = ["alice", "alice", "bob", "bob", "carol"]


def _every_operation(comm: Communicator) -> dict[str, Any]:
    rank, n = comm.rank, comm.world_size
    out: dict[str, Any] = {}
    t = torch.arange(10, dtype=torch.float32) * (rank + 1)
    comm.all_reduce(t)
    out["sum"] = t.tolist()
    m = torch.tensor([float(rank), -float(rank)])
    comm.all_reduce(m, op="max")
    out["max"] = m.tolist()
    a = torch.full((3,), float(rank))
    comm.all_reduce(a, op="avg")
    out["avg"] = a.tolist()
    out["gather"] = [x.tolist() for x in comm.all_gather(torch.tensor([rank, rank * 2]))]
    b = torch.tensor([float(rank)] * 4)
    comm.broadcast(b, src=3)
    out["broadcast"] = b.tolist()
    inside = comm.new_group([0, 1], "alice-only")
    across = comm.new_group([1, 2, 4], "across")
    bob = comm.new_group([2, 3], "bob-only")
    if rank in bob.ranks:
        # a party's pair gathers by a direct exchange, on the ranks of the party's own group
        mixed = torch.tensor([[rank, -rank], [7, 8]], dtype=torch.float64).t()
        out["bob_gather"] = [g.tolist() for g in comm.all_gather(mixed, bob)]
    if rank in inside.ranks:
        x = torch.ones(2) * (rank + 1)
        comm.all_reduce(x, group=inside)
        out["inside"] = x.tolist()
    if rank in across.ranks:
        x = torch.ones(5) * (rank + 1)
        comm.all_reduce(x, group=across)
        out["across"] = x.tolist()
        out["across_gather"] = [g.tolist() for g in comm.all_gather(torch.tensor([rank]), across)]
    right, left = (rank + 1) % n, (rank - 1) % n
    work = comm.isend(torch.full((50_000,), float(rank)), right)
    got = torch.empty(50_000)
    comm.recv(got, left)
    work.wait()
    out["ring"] = float(got[0])
    back = torch.empty(3, dtype=torch.int64)
    pending = comm.irecv(back, right)
    comm.send(torch.tensor([rank, rank, rank]), left)
    pending.wait()
    out["back"] = back.tolist()
    out["data"] = comm.all_gather_data({"rank": rank, "tag": f"r{rank}", "blob": b"x" * rank})
    comm.barrier()
    out["stats"] = comm.stats.snapshot()
    return out


def test_a_world_of_three_parties_computes_and_counts_what_one_gloo_world_does() -> None:
    mesh = run_world(_every_operation, 5, parties=PARTIES)
    gloo = run_world(_every_operation, 5)

    assert mesh == gloo
    assert mesh[0]["sum"] == [float(15 * i) for i in range(10)]
    assert mesh[2]["across"] == [10.0] * 5
    assert (
        mesh[2]["bob_gather"]
        == mesh[3]["bob_gather"]
        == [
            [[2.0, 7.0], [-2.0, 8.0]],
            [[3.0, 7.0], [-3.0, 8.0]],
        ]
    )
    assert mesh[0]["data"][4] == {"rank": 4, "tag": "r4", "blob": b"xxxx"}


def _links(comm: Communicator) -> dict[str, Any]:
    assert isinstance(comm, MeshCommunicator)
    seen: dict[int, Any] = {}
    for peer, link in comm.out.items():
        assert isinstance(link.sock, ssl.SSLSocket)
        identity = peer_identity(link.sock)
        seen[peer] = (link.sock.version(), identity.party, identity.attempt is not None)
    for peer, into in comm.into.items():
        assert peer_identity(into.sock).party == comm.party_of(peer)
    return {"out": seen, "in": sorted(comm.into)}


def test_ranks_of_different_parties_talk_over_tls_with_their_partys_certificates() -> None:
    links = run_world(_links, 5, parties=PARTIES)

    assert links[0]["out"] == {
        2: ("TLSv1.3", "bob", True),
        3: ("TLSv1.3", "bob", True),
        4: ("TLSv1.3", "carol", True),
    }
    assert links[0]["in"] == [2, 3, 4]
    assert sorted(links[4]["out"]) == [0, 1, 2, 3]
    assert 1 not in links[0]["out"]  # one party: its own world, no link


def _one_party(comm: Communicator) -> tuple[bool, float]:
    assert isinstance(comm, MeshCommunicator)
    t = torch.ones(1) * comm.rank
    comm.all_reduce(t)
    return (not comm.out and not comm.into), float(t)


def test_a_job_of_one_party_is_a_plain_world_of_its_own() -> None:
    assert run_world(_one_party, 3, parties=["bob"] * 3) == [(True, 3.0)] * 3


def _bits(t: torch.Tensor) -> list[int]:
    return t.contiguous().view(torch.int64).flatten().tolist()


def _pair_all_reduce(comm: Communicator) -> dict[str, Any]:
    sent: list[int] = []
    if isinstance(comm, MeshCommunicator):
        comm.tap = lambda peer, payload: sent.append(len(payload))
    rank = comm.rank
    values: dict[str, Any] = {}
    bits: dict[str, list[int]] = {}
    gen = torch.Generator().manual_seed(100 + rank)
    for size in (1, 7, 10_001):
        for op in ("sum", "max", "min", "avg"):
            t = torch.randn(size, generator=gen, dtype=torch.float64)
            comm.all_reduce(t, op=op)
            values[f"{op}-{size}"], bits[f"{op}-{size}"] = t.tolist(), _bits(t)
    # ties the order of the operands decides: signed zeros, NaNs of different payloads
    zeros = torch.tensor([-0.0, 0.0, -0.0]) if rank == 0 else torch.tensor([0.0, -0.0, -0.0])
    tied: tuple[ReduceOp, ...] = ("sum", "max", "min")
    for tie in tied:
        t = zeros.clone().double()
        comm.all_reduce(t, op=tie)
        bits[f"zeros-{tie}"] = _bits(t)
    nan = torch.tensor([0x7FF8000000000001 + rank], dtype=torch.int64).view(torch.float64)
    comm.all_reduce(nan)
    bits["nan"] = _bits(nan)
    # a transposed (non-contiguous) tensor and an integer one
    t = (torch.arange(6, dtype=torch.float32).view(2, 3) * (rank + 1)).t()
    comm.all_reduce(t)
    values["transposed"] = t.tolist()
    ints = torch.tensor([rank, 5, -rank], dtype=torch.int64)
    comm.all_reduce(ints, op="max")
    values["ints"] = ints.tolist()
    # beyond the one-exchange size, the ring's two halves
    big = torch.full((1 << 18,), float(rank + 1), dtype=torch.float64)
    comm.all_reduce(big)
    values["big"] = float(big.sum())
    return {"values": values, "bits": bits, "sent": sent}


def test_two_parties_all_reduce_in_one_exchange_with_the_same_bits_on_both() -> None:
    mesh = run_world(_pair_all_reduce, 2, parties=["alice", "bob"])
    gloo = run_world(_pair_all_reduce, 2)

    assert mesh[0]["bits"] == mesh[1]["bits"]
    assert mesh[0]["values"] == mesh[1]["values"] == gloo[0]["values"]
    assert mesh[0]["values"]["transposed"] == [[0.0, 9.0], [3.0, 12.0], [6.0, 15.0]]
    assert mesh[0]["values"]["ints"] == [1, 5, 0]
    assert mesh[0]["values"]["big"] == 3.0 * (1 << 18)
    # one message each way per all-reduce, the whole tensor (a ring sends two halves); the
    # large tensor goes round the ring
    small = [8 * n for n in (1, 7, 10_001) for _ in range(4)] + [24] * 3 + [8, 24, 24]
    assert mesh[0]["sent"] == mesh[1]["sent"] == [*small, 1 << 20, 1 << 20]


def _announces_too_much(comm: Communicator) -> str:
    if comm.rank == 1:  # the hostile party: the size exchange of all_gather_data, then silence
        comm.all_gather(torch.tensor([1 << 40], dtype=torch.int64))
        return "sent"
    try:
        comm.all_gather_data({"ids": list(range(10))})
    except DecodeError as exc:
        return str(exc)
    return "read"


def test_a_peer_announcing_too_much_data_is_refused_before_anything_is_allocated() -> None:
    said = run_world(_announces_too_much, 2, parties=["alice", "bob"])
    assert said[1] == "sent"
    assert said[0].startswith(f"ranks [1] announced data outside 0..{MAX_DATA_BYTES} bytes")
