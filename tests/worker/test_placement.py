"""Placement of a rank plan on the workers' registered hardware (pure, no database)."""

from __future__ import annotations

from typing import Any

import pytest

from tessera_api.scheduling.placement import DeviceRules, Waiting, WorkerView, place
from tessera_api.services.lifecycle import backend_for
from tessera_ml.registry import all_specs
from tessera_ml.spec import AlgorithmSpec, Assignment, JobDevice, RoleSpec

GIB = 1024**3
GPU_ROLE = RoleSpec(name="trainer", min=1, devices=("cpu", "cuda"), gpu_benefit=True)
NO_BENEFIT = RoleSpec(name="trainer", min=1, devices=("cpu", "cuda"))
CPU_ROLE = RoleSpec(name="dealer", min=1)


def _plan(*parties: str, role: str = "trainer") -> list[dict[str, Any]]:
    return [{"rank": r, "party": p, "role": role} for r, p in enumerate(parties)]


def _gpu(free_gib: int) -> dict[str, Any]:
    return {"name": "gpu", "total_memory": 80 * GIB, "free_memory": free_gib * GIB}


def _rules(*roles: RoleSpec, device: JobDevice = "auto", one_type: bool = False) -> DeviceRules:
    return DeviceRules(roles={r.name: r for r in roles}, device=device, one_device_type=one_type)


def _hosting(result: Any) -> dict[str, list[tuple[int, str]]]:
    assert not isinstance(result, Waiting), result
    return {p.worker_id: [(r.rank, r.device) for r in p.ranks] for p in result}


def _devices(result: Any) -> dict[int, str]:
    assert not isinstance(result, Waiting), result
    return {r.rank: r.device for p in result for r in p.ranks}


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


def test_a_role_that_benefits_gets_a_gpu_per_rank_most_free_memory_first() -> None:
    gpus = [
        WorkerView("a", "alice", 8, accelerators=[_gpu(10), _gpu(70)]),
        WorkerView("b", "bob", 8, accelerators=[_gpu(40)]),
    ]
    result = place(_plan("alice", "alice", "bob"), gpus, _rules(GPU_ROLE))
    assert _hosting(result) == {"a": [(0, "cuda:1"), (1, "cuda:0")], "b": [(2, "cuda:0")]}
    assert not isinstance(result, Waiting)
    assert {r.backend for p in result for r in p.ranks} == {"nccl"}


def test_gpu_and_cpu_parties_mix_each_party_on_one_backend() -> None:
    workers = [
        WorkerView("a", "alice", 8, accelerators=[_gpu(40), _gpu(40)]),
        WorkerView("b", "bob", 8),
    ]
    result = place(_plan("alice", "alice", "bob", "bob"), workers, _rules(GPU_ROLE))
    assert not isinstance(result, Waiting)
    by_party = {p.party: {(r.device[:4], r.backend) for r in p.ranks} for p in result}
    assert by_party == {"alice": {("cuda", "nccl")}, "bob": {("cpu", "gloo")}}


def test_busy_gpus_make_the_job_wait_and_say_why_instead_of_falling_back() -> None:
    busy = [WorkerView("a", "alice", 8, accelerators=[_gpu(40)], busy_gpus=frozenset({0}))]
    assert place(_plan("alice"), busy, _rules(GPU_ROLE)) == Waiting(
        "party alice has no free GPU for role trainer"
    )
    half = [WorkerView("a", "alice", 8, accelerators=[_gpu(40)] * 2, busy_gpus=frozenset({0}))]
    assert place(_plan("alice", "alice"), half, _rules(GPU_ROLE)) == Waiting(
        "party alice has 1 free GPU for 2 ranks of role trainer"
    )


def test_auto_uses_cpu_where_a_party_has_too_few_gpus_cuda_waits_and_says_so() -> None:
    one = [WorkerView("a", "alice", 8, accelerators=[_gpu(40)])]
    plan = _plan("alice", "alice")
    assert set(_devices(place(plan, one, _rules(GPU_ROLE))).values()) == {"cpu"}
    assert place(plan, one, _rules(GPU_ROLE, device="cuda")) == Waiting(
        "party alice has 1 GPU on its online workers for 2 ranks of role trainer"
    )


def test_the_job_device_choice() -> None:
    gpus = [WorkerView("a", "alice", 8, accelerators=[_gpu(40)])]
    assert _devices(place(_plan("alice"), gpus, _rules(GPU_ROLE, device="cpu"))) == {0: "cpu"}
    # a role that can use a GPU without benefiting: auto keeps it on CPU, cuda asks for one
    assert _devices(place(_plan("alice"), gpus, _rules(NO_BENEFIT))) == {0: "cpu"}
    assert _devices(place(_plan("alice"), gpus, _rules(NO_BENEFIT, device="cuda"))) == {0: "cuda:0"}
    # a CPU-only role stays on CPU whatever the job asks
    cpu_plan = _plan("alice", role="dealer")
    assert _devices(place(cpu_plan, gpus, _rules(CPU_ROLE, device="cuda"))) == {0: "cpu"}


def test_a_party_playing_a_cpu_only_role_keeps_all_its_ranks_on_cpu() -> None:
    plan = [
        {"rank": 0, "party": "alice", "role": "trainer"},
        {"rank": 1, "party": "alice", "role": "dealer"},
    ]
    gpus = [WorkerView("a", "alice", 8, accelerators=[_gpu(40)] * 2)]
    assert _devices(place(plan, gpus, _rules(GPU_ROLE, CPU_ROLE))) == {0: "cpu", 1: "cpu"}


def test_one_device_type_never_mixes_devices() -> None:
    workers = [
        WorkerView("a", "alice", 8, accelerators=[_gpu(40)]),
        WorkerView("b", "bob", 8),
    ]
    plan = _plan("alice", "bob")
    mixed = _devices(place(plan, workers, _rules(GPU_ROLE)))
    assert mixed == {0: "cuda:0", 1: "cpu"}
    assert _devices(place(plan, workers, _rules(GPU_ROLE, one_type=True))) == {0: "cpu", 1: "cpu"}
    assert place(plan, workers, _rules(GPU_ROLE, device="cuda", one_type=True)) == Waiting(
        "party bob has 0 GPUs on its online workers for 1 rank of role trainer"
    )


def _example_plan(spec: AlgorithmSpec) -> list[dict[str, Any]]:
    """One party per role (each with two processes where the role allows it)."""
    assignments = []
    for i, role in enumerate(spec.roles):
        for j in range(max(role.min, 1)):
            most = role.max_processes or 2
            assignments.append(
                Assignment(party=f"p{i}-{j}", role=role.name, processes=min(2, most))
            )
    config = spec.parse_config({})
    return [s.model_dump() for s in spec.plan(assignments, config)]


@pytest.mark.parametrize("name", sorted(all_specs()))
@pytest.mark.parametrize("device", ["auto", "cpu", "cuda"])
@pytest.mark.parametrize("gpus_per_worker", [0, 4])
def test_every_algorithm_is_placed_as_its_device_contract_says(
    name: str, device: JobDevice, gpus_per_worker: int
) -> None:
    spec = all_specs()[name]
    plan = _example_plan(spec)
    parties = sorted({str(s["party"]) for s in plan})
    workers = [
        WorkerView(f"w-{p}", p, 8, accelerators=[_gpu(40)] * gpus_per_worker) for p in parties
    ]
    rules = DeviceRules(
        roles={r.name: r for r in spec.roles}, device=device, one_device_type=spec.one_device_type
    )
    result = place(plan, workers, rules)
    role_of = {int(s["rank"]): spec.role(str(s["role"])) for s in plan}
    if isinstance(result, Waiting):
        # only a job that asks for GPUs its parties do not have waits
        assert device == "cuda" and gpus_per_worker == 0, result
        assert "GPU" in result.reason
        return
    devices = _devices(result)
    assert sorted(devices) == sorted(role_of)
    for placement in result:
        assert len({r.backend for r in placement.ranks}) == 1
        for r in placement.ranks:
            role = role_of[r.rank]
            assert role is not None
            assert r.backend == backend_for(r.device)
            if r.device.startswith("cuda"):
                assert role.can_use_gpu and device != "cpu" and gpus_per_worker > 0
            elif gpus_per_worker and (
                (device == "cuda" and role.can_use_gpu) or (device == "auto" and role.gpu_benefit)
            ):
                # only a CPU-only role played by the same party keeps this rank off its GPU
                others = [role_of[x.rank] for x in placement.ranks]
                assert not all(o is not None and o.can_use_gpu for o in others)
    if spec.one_device_type:
        assert len({d.split(":")[0] for d in devices.values()}) == 1


def test_the_device_table_in_docs_matches_every_role_contract() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "gpu.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[0] != "`device`":
            rows[(cells[0].strip("`"), cells[1])] = (cells[2], cells[3].split(" ")[0])
    expected = {
        (spec.name, role.name): (", ".join(role.devices), "yes" if role.gpu_benefit else "no")
        for spec in all_specs().values()
        for role in spec.roles
    }
    assert rows == expected
