"""Placement of a rank plan on the workers' registered hardware (pure, no database)."""

from __future__ import annotations

from typing import Any

from tessera_api.scheduling.placement import Waiting, WorkerView, place

GIB = 1024**3


def _plan(*parties: str) -> list[dict[str, Any]]:
    return [{"rank": r, "party": p, "role": "trainer"} for r, p in enumerate(parties)]


def _gpu(free_gib: int) -> dict[str, Any]:
    return {"name": "gpu", "total_memory": 80 * GIB, "free_memory": free_gib * GIB}


def _hosting(result: Any) -> dict[str, list[tuple[int, str]]]:
    assert not isinstance(result, Waiting), result
    return {p.worker_id: [(r.rank, r.device) for r in p.ranks] for p in result}


def test_a_party_without_an_online_worker_makes_the_job_wait() -> None:
    result = place(_plan("alice", "bob", "carol"), [WorkerView("w1", "alice", 4)])
    assert result == Waiting("waiting for workers of parties bob, carol")
    assert place(_plan("alice", "bob"), [WorkerView("w1", "alice", 4)]) == Waiting(
        "waiting for a worker of party bob"
    )


def test_cpu_ranks_spread_over_a_party_workers_by_cpu_count_and_load() -> None:
    workers = [
        WorkerView("big", "alice", 8),
        WorkerView("small", "alice", 2),
        WorkerView("busy", "bob", 4, busy_ranks=4),
        WorkerView("idle", "bob", 4),
    ]
    hosting = _hosting(place(_plan("alice", "alice", "alice", "bob", "bob"), workers))
    assert hosting == {
        "big": [(0, "cpu"), (1, "cpu"), (2, "cpu")],
        "idle": [(3, "cpu"), (4, "cpu")],
    }


def test_gpus_only_when_every_rank_gets_its_own() -> None:
    gpus = [
        WorkerView("a", "alice", 8, accelerators=[_gpu(10), _gpu(70)]),
        WorkerView("b", "bob", 8, accelerators=[_gpu(40)], busy_gpus=frozenset()),
    ]
    hosting = _hosting(place(_plan("alice", "alice", "bob"), gpus))
    assert hosting == {"a": [(0, "cuda:1"), (1, "cuda:0")], "b": [(2, "cuda:0")]}

    busy = [gpus[0], WorkerView("b", "bob", 8, accelerators=[_gpu(40)], busy_gpus=frozenset({0}))]
    hosting = _hosting(place(_plan("alice", "alice", "bob"), busy))
    assert all(device == "cpu" for ranks in hosting.values() for _, device in ranks)
