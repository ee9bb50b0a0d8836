"""Turn a rank plan into placements on the online workers of each party.

Each party's ranks run either all on GPUs (one GPU each, talking over NCCL inside the party) or
all on CPUs (gloo); ranks of different parties always talk over the TLS mesh. A party's ranks go
on GPUs when every role they play can use one (the algorithm's device contract) and the job asks
for it: ``device: cuda`` always, ``auto`` when one of its roles benefits from a GPU and the
party's online workers have a GPU for each rank. When those GPUs are busy the job waits and
says why, instead of falling back to CPU. CPU ranks of a party are spread over its online
workers in proportion to their CPU counts, counting the ranks they already run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tessera_api.services.lifecycle import Placement, RankDevice
from tessera_ml.spec import JobDevice, RoleSpec


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
class DeviceRules:
    """What placement needs of a job: its roles' device contracts and the device it asks for."""

    roles: Mapping[str, RoleSpec]
    device: JobDevice = "auto"
    one_device_type: bool = False

    def role(self, name: str) -> RoleSpec:
        return self.roles.get(name) or RoleSpec(name=name, min=0)


CPU_ONLY = DeviceRules(roles={})


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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


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
        hosted.setdefault(worker.id, []).append(RankDevice(rank, f"cuda:{index}", "nccl"))
    return hosted


def _on_cpus(ranks: Sequence[int], workers: Sequence[WorkerView]) -> dict[str, list[RankDevice]]:
    load = {w.id: w.busy_ranks for w in workers}
    hosted: dict[str, list[RankDevice]] = {}
    for rank in ranks:
        worker = min(workers, key=lambda w: ((load[w.id] + 1) / max(w.cpu_count, 1), w.id))
        load[worker.id] += 1
        hosted.setdefault(worker.id, []).append(RankDevice(rank, "cpu", "gloo"))
    return hosted


def _roles_of(plan: Sequence[Mapping[str, Any]], party: str, rules: DeviceRules) -> list[RoleSpec]:
    """The roles a party plays, in the order of their first rank."""
    names: list[str] = []
    for slot in sorted(plan, key=lambda s: int(s["rank"])):
        if str(slot["party"]) == party and str(slot["role"]) not in names:
            names.append(str(slot["role"]))
    return [rules.role(n) for n in names]


def _wants_gpus(
    party: str, roles: Sequence[RoleSpec], ranks: int, gpus: int, rules: DeviceRules
) -> bool | Waiting:
    """Whether the party's ranks should run on GPUs, or why the job must wait for GPUs."""
    if rules.device == "cpu" or not all(r.can_use_gpu for r in roles):
        return False
    if rules.device == "auto" and not any(r.gpu_benefit for r in roles):
        return False
    if gpus >= ranks:
        return True
    if rules.device == "auto":
        return False
    return Waiting(
        f"party {party} has {_plural(gpus, 'GPU')} on its online workers for "
        f"{_plural(ranks, 'rank')} of role {roles[0].name}"
    )


def _device_kinds(
    plan: Sequence[Mapping[str, Any]],
    of_party: Mapping[str, Sequence[WorkerView]],
    by_party: Mapping[str, Sequence[int]],
    rules: DeviceRules,
) -> dict[str, bool] | Waiting:
    """For each party, whether its ranks run on GPUs."""
    use_gpus: dict[str, bool] = {}
    for party, ranks in by_party.items():
        total = sum(len(w.accelerators) for w in of_party[party])
        wanted = _wants_gpus(party, _roles_of(plan, party, rules), len(ranks), total, rules)
        if isinstance(wanted, Waiting):
            return wanted
        use_gpus[party] = wanted
    if rules.one_device_type and len(set(use_gpus.values())) > 1:
        if rules.device == "cuda":
            cpu = sorted(p for p, on_gpu in use_gpus.items() if not on_gpu)
            return Waiting(
                "every rank of this algorithm must run on the same kind of device, and "
                f"{', '.join(cpu)} cannot run on a GPU"
            )
        return dict.fromkeys(use_gpus, False)
    return use_gpus


def place(
    plan: Sequence[Mapping[str, Any]],
    workers: Sequence[WorkerView],
    rules: DeviceRules = CPU_ONLY,
) -> list[Placement] | Waiting:
    """Placements for every rank of ``plan`` on ``workers`` (online ones only), or why not."""
    by_party = ranks_by_party(plan)
    of_party = {p: [w for w in workers if w.party == p] for p in by_party}
    missing = [p for p, ws in of_party.items() if not ws]
    if missing:
        return Waiting(waiting_reason(missing))
    use_gpus = _device_kinds(plan, of_party, by_party, rules)
    if isinstance(use_gpus, Waiting):
        return use_gpus
    gpus = {p: _gpu_slots(ws) for p, ws in of_party.items()}
    for party, ranks in by_party.items():
        free = len(gpus[party])
        if use_gpus[party] and free < len(ranks):
            role = next(r.name for r in _roles_of(plan, party, rules) if r.can_use_gpu)
            return Waiting(
                f"party {party} has no free GPU for role {role}"
                if free == 0
                else f"party {party} has {_plural(free, 'free GPU')} for "
                f"{_plural(len(ranks), 'rank')} of role {role}"
            )
    placements: list[Placement] = []
    for party, ranks in by_party.items():
        hosted = (
            _on_gpus(ranks, gpus[party]) if use_gpus[party] else _on_cpus(ranks, of_party[party])
        )
        placements.extend(
            Placement(party=party, worker_id=worker_id, ranks=tuple(devices))
            for worker_id, devices in sorted(hosted.items(), key=lambda kv: kv[1][0].rank)
        )
    return placements
