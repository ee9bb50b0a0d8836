"""Both communicators run the same protocol with the same results and the same byte counts."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import torch

from tessera_ml.comm import codec
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.local import LocalWorldBroken, run_local
from tessera_ml.worlds import run_world
from tests.ml.planted import Touch

pytestmark = pytest.mark.usefixtures("one_thread")

FLOAT = 4


def _protocol(comm: Communicator) -> dict[str, Any]:
    r, n = comm.rank, comm.world_size
    summed = torch.full((10,), float(r + 1))
    comm.all_reduce(summed)
    biggest = torch.tensor([float(r)])
    comm.all_reduce(biggest, "max")
    mean = torch.full((6,), float(r))
    comm.all_reduce(mean, "avg")
    gathered = comm.all_gather(torch.tensor([r, r * 10]))
    root = torch.arange(5, dtype=torch.float64) if r == 1 else torch.zeros(5, dtype=torch.float64)
    comm.broadcast(root, 1)
    pair = comm.new_group([0, 2], "pair")
    in_pair = None
    if r in pair.ranks:
        t = torch.tensor([float(r)] * 3)
        comm.all_reduce(t, group=pair)
        in_pair = t.tolist()
    comm.barrier()
    nxt, prv = (r + 1) % n, (r - 1) % n
    sending = comm.isend(torch.full((7,), float(r)), nxt)
    got = torch.empty(7)
    comm.recv(got, prv)
    sending.wait()
    work = comm.irecv(torch.empty(2, dtype=torch.int64), prv) if r else None
    if r != n - 1:
        comm.isend(torch.tensor([r, r], dtype=torch.int64), nxt).wait()
    if work is not None:
        work.wait()
    if r == 0:
        comm.send_data({"hello": [1, 2, 3]}, 2)
    received = comm.recv_data(0) if r == 2 else None
    names = comm.all_gather_data(f"rank{r}")
    stats = comm.stats.snapshot()
    return {
        "summed": summed.tolist(),
        "biggest": biggest.item(),
        "mean": mean.tolist(),
        "gathered": [g.tolist() for g in gathered],
        "root": root.tolist(),
        "in_pair": in_pair,
        "got": got[0].item(),
        "object": received,
        "names": names,
        "stats": {k: (dict(v) if isinstance(v, dict) else v) for k, v in stats.items()},
        "metrics": comm.stats.metrics(),
    }


def _check(results: list[dict[str, Any]]) -> None:
    for r, out in enumerate(results):
        assert out["summed"] == [6.0] * 10
        assert out["biggest"] == 2.0
        assert out["mean"] == [1.0] * 6
        assert out["gathered"] == [[0, 0], [1, 10], [2, 20]]
        assert out["root"] == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert out["got"] == float((r - 1) % 3)
        assert out["names"] == ["rank0", "rank1", "rank2"]
    assert results[0]["in_pair"] == results[2]["in_pair"] == [2.0] * 3
    assert results[2]["object"] == {"hello": [1, 2, 3]}
    s0, s1 = results[0]["stats"], results[1]["stats"]
    # ring model: all-reduce moves 2(n-1)/n of the tensor per rank; all-gather (n-1) x
    world_collectives = 2 * 2 * (10 + 1 + 6) * FLOAT // 3 + 2 * 2 * 8
    assert s1["group_sent"]["world"] == world_collectives + 2 * 5 * 8 + _gathered_bytes()
    assert s0["group_recv"]["world"] == world_collectives + 5 * 8 + _gathered_bytes()
    assert s0["group_sent"]["pair"] == 2 * 1 * 3 * FLOAT // 2
    assert s0["sent_to"][1] == 7 * FLOAT + 2 * 8
    assert s0["sent_to"][2] == 8 + len(codec.encode({"hello": [1, 2, 3]}))
    assert s1["recv_from"][0] == 7 * FLOAT + 2 * 8
    assert s0["sent"] == sum(s0["sent_to"].values()) + sum(s0["group_sent"].values())
    m0 = results[0]["metrics"]
    assert m0["bytes_sent"] == s0["sent"] and m0["bytes_received"] == s0["received"]
    assert m0["bytes_sent.to.1"] == s0["sent_to"][1]
    assert m0["bytes_sent.group.pair"] == s0["group_sent"]["pair"]


def _gathered_bytes() -> int:
    return 2 * len(codec.encode("rank0"))


def test_local_communicator_protocol_and_bytes() -> None:
    _check(run_local(_protocol, 3))


def test_torch_dist_communicator_matches_the_local_one() -> None:
    real = run_world(_protocol, 3)
    _check(real)
    local = run_local(_protocol, 3)
    assert [r["stats"] for r in real] == [r["stats"] for r in local]


def _fails_at_rank_one(comm: Communicator) -> None:
    if comm.rank == 1:
        raise KeyError("rank one broke")
    comm.recv(torch.empty(1), 1)


def test_local_world_surfaces_the_first_real_error() -> None:
    with pytest.raises(KeyError, match="rank one broke"):
        run_local(_fails_at_rank_one, 3, timeout_s=10)


def _mismatch(comm: Communicator) -> None:
    if comm.rank == 0:
        comm.send(torch.zeros(3), 1)
    else:
        comm.recv(torch.zeros(4), 0)


def test_local_recv_checks_shape() -> None:
    with pytest.raises(ValueError, match="expected"):
        run_local(_mismatch, 2, timeout_s=10)
    with pytest.raises(LocalWorldBroken, match="timed out"):
        run_local(lambda c: c.recv(torch.zeros(1), 1 - c.rank), 2, timeout_s=0.5)


def _pickle_to_rank_one(comm: Communicator, marker: str) -> str | None:
    if comm.rank == 0:
        payload = torch.frombuffer(bytearray(pickle.dumps(Touch(marker))), dtype=torch.uint8)
        comm.send(torch.tensor([payload.numel()], dtype=torch.int64), 1)
        comm.send(payload, 1)
        return None
    with pytest.raises(codec.DecodeError) as refused:
        comm.recv_data(0)
    assert not Path(marker).exists()
    return str(refused.value)


@pytest.mark.parametrize("parties", [None, ["alice", "bob"]], ids=["gloo", "between-parties"])
def test_a_peer_pickle_is_refused_and_never_loaded(
    tmp_path: Path, parties: list[str] | None
) -> None:
    live = tmp_path / "live"
    pickle.loads(pickle.dumps(Touch(str(live))))
    assert live.exists(), "the payload would act if it were unpickled"
    marker = tmp_path / "marker"
    _, message = run_world(_pickle_to_rank_one, 2, str(marker), parties=parties)
    assert message is not None and "pickled payload" in message
    assert not marker.exists()


def _gather_sizes(comm: Communicator) -> dict[str, Any]:
    r = comm.rank
    mine = {"rank": r, "blob": bytes([r]) * (1000 * r), "t": torch.arange(7.0 * r), "r": (r,) * r}
    everyone = comm.all_gather_data(mine)
    pair = comm.new_group([0, 2], "pair")
    in_pair = comm.all_gather_data([r] * (r + 1), pair) if r in pair.ranks else None
    stats = comm.stats.snapshot()
    return {
        "everyone": [{**got, "t": (got["t"].dtype, got["t"].tolist())} for got in everyone],
        "in_pair": in_pair,
        "own_size": len(codec.encode(mine)),
        "group_sent": stats["group_sent"],
        "group_recv": stats["group_recv"],
    }


def _check_gathered(results: list[dict[str, Any]]) -> None:
    for r, out in enumerate(results):
        assert len(out["everyone"]) == 3
        for k, got in enumerate(out["everyone"]):
            assert got["rank"] == k and got["blob"] == bytes([k]) * (1000 * k)
            assert got["t"] == (torch.float32, [float(i) for i in range(7 * k)])
            assert got["r"] == (k,) * k
        assert out["group_sent"]["world"] == out["group_recv"]["world"] == 2 * out["own_size"]
        if r == 1:
            assert out["in_pair"] is None and "pair" not in out["group_sent"]
        else:
            assert out["in_pair"] == [[0], [2, 2, 2]]
            moved = len(codec.encode([r] * (r + 1)))
            assert out["group_sent"]["pair"] == out["group_recv"]["pair"] == moved
    assert len({out["own_size"] for out in results}) == 3


def test_all_gather_data_of_different_sizes_on_a_real_world() -> None:
    real = run_world(_gather_sizes, 3)
    _check_gathered(real)
    local = run_local(_gather_sizes, 3)
    _check_gathered(local)
    assert [r["group_sent"] for r in real] == [r["group_sent"] for r in local]


def _on_device(comm: Communicator) -> tuple[str, float, Any]:
    t = torch.ones(4, device=comm.device) * (comm.rank + 1)
    comm.all_reduce(t)
    return str(comm.device), float(t.sum().cpu()), comm.all_gather_data(comm.rank)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the NCCL path needs a CUDA GPU")
def test_nccl_world_keeps_tensors_on_each_rank_gpu() -> None:
    n = min(2, torch.cuda.device_count())
    results = run_world(_on_device, n, backend="nccl")
    for rank, (device, total, everyone) in enumerate(results):
        assert device == f"cuda:{rank}"
        assert total == 4 * n * (n + 1) / 2
        assert everyone == list(range(n))


def _pair_gathers(comm: Communicator) -> dict[str, Any]:
    r, other = comm.rank, 1 - comm.rank
    # a point-to-point message between the same two ranks is in flight across the gathers
    pending = comm.isend(torch.full((7,), float(r)), other)
    floats = comm.all_gather(torch.tensor([0.5 + r, -0.0]))
    ints = comm.all_gather(torch.arange(6, dtype=torch.int64).view(2, 3).t() * (r + 1))
    data = comm.all_gather_data({"rank": r, "blob": b"y" * (3 * r)})
    got = torch.empty(7)
    comm.recv(got, other)
    pending.wait()
    return {
        "floats": [g.tolist() for g in floats],
        "signs": [bool(torch.signbit(g[1])) for g in floats],
        "ints": [g.tolist() for g in ints],
        "data": data,
        "got": got.tolist(),
        "gathered_bytes": comm.stats.snapshot()["group_sent"]["world"],
    }


def test_a_pair_gathers_exactly_beside_its_own_point_to_point_messages() -> None:
    real = run_world(_pair_gathers, 2)
    local = run_local(_pair_gathers, 2)
    for r, out in enumerate(real):
        assert out["floats"] == [[0.5, 0.0], [1.5, 0.0]]
        assert out["signs"] == [True, True]
        assert out["ints"] == [[[0, 3], [1, 4], [2, 5]], [[0, 6], [2, 8], [4, 10]]]
        assert out["data"] == [{"rank": 0, "blob": b""}, {"rank": 1, "blob": b"yyy"}]
        assert out["got"] == [float(1 - r)] * 7
    assert [o["gathered_bytes"] for o in real] == [o["gathered_bytes"] for o in local]
