"""Turn a rank plan into placements on the online workers of each party.

GPUs are used only when every rank of the job gets a device of its own (then the world runs
NCCL); otherwise every rank runs on CPU under gloo. CPU ranks of a party are spread over its
online workers in proportion to their CPU counts, counting the ranks they already run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tessera_api.services.lifecycle import Placement, RankDevice


@dataclass(frozen=True)
class WorkerView:
    """What placement needs to know about one online worker."""

    id: str
    party: str
    cpu_count: int
    accelerators: Sequence[Mapping[str, Any]] = ()
    busy_ranks: int = 0
    busy_gpus: frozenset[int] = field(default_factory=frozenset)


@dataclass(frozen=True)
class Waiting:
    """The job cannot be placed yet, and why."""

    reason: str


def ranks_by_party(plan: Sequence[Mapping[str, Any]]) -> dict[str, list[int]]:
    """Global ranks of each party, parties in order of their first rank."""
    by_party: dict[str, list[int]] = {}
    for slot in sorted(plan, key=lambda s: int(s["rank"])):
        by_party.setdefault(str(slot["party"]), []).append(int(slot["rank"]))
    return by_party


def waiting_reason(missing: Sequence[str]) -> str:
    if len(missing) == 1:
        return f"waiting for a worker of party {missing[0]}"
    return f"waiting for workers of parties {', '.join(missing)}"


def _gpu_slots(workers: Sequence[WorkerView]) -> list[tuple[WorkerView, int]]:
    """Free GPUs of a party's workers, most free memory first."""
    slots = [
        (w, i, int(a.get("free_memory") or 0))
        for w in workers
        for i, a in enumerate(w.accelerators)
        if i not in w.busy_gpus
    ]
    slots.sort(key=lambda s: (-s[2], s[0].id, s[1]))
    return [(w, i) for w, i, _ in slots]


def _on_gpus(
    ranks: Sequence[int], slots: Sequence[tuple[WorkerView, int]]
) -> dict[str, list[RankDevice]]:
    hosted: dict[str, list[RankDevice]] = {}
    for rank, (worker, index) in zip(ranks, slots, strict=False):
        hosted.setdefault(worker.id, []).append(RankDevice(rank, f"cuda:{index}"))
    return hosted


def _on_cpus(ranks: Sequence[int], workers: Sequence[WorkerView]) -> dict[str, list[RankDevice]]:
    load = {w.id: w.busy_ranks for w in workers}
    hosted: dict[str, list[RankDevice]] = {}
    for rank in ranks:
        worker = min(workers, key=lambda w: ((load[w.id] + 1) / max(w.cpu_count, 1), w.id))
        load[worker.id] += 1
        hosted.setdefault(worker.id, []).append(RankDevice(rank, "cpu"))
    return hosted


def place(
    plan: Sequence[Mapping[str, Any]], workers: Sequence[WorkerView]
) -> list[Placement] | Waiting:
    """Placements for every rank of ``plan`` on ``workers`` (online ones only), or why not."""
    by_party = ranks_by_party(plan)
    of_party = {p: [w for w in workers if w.party == p] for p in by_party}
    missing = [p for p, ws in of_party.items() if not ws]
    if missing:
        return Waiting(waiting_reason(missing))
    gpus = {p: _gpu_slots(ws) for p, ws in of_party.items()}
    use_gpus = all(len(gpus[p]) >= len(ranks) for p, ranks in by_party.items())
    placements: list[Placement] = []
    for party, ranks in by_party.items():
        hosted = _on_gpus(ranks, gpus[party]) if use_gpus else _on_cpus(ranks, of_party[party])
        placements.extend(
            Placement(party=party, worker_id=worker_id, ranks=tuple(devices))
            for worker_id, devices in sorted(hosted.items(), key=lambda kv: kv[1][0].rank)
        )
    return placements
