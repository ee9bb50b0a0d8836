"""Every algorithm as a platform job on a GPU machine (``pytest -m gpu``; skipped without CUDA).

The platform is the zero-setup one (SQLite and the embedded broker: a GPU machine needs no other
services) with a worker for each of alice, bob and carol, which report the machine's GPUs. Each
job asks for ``device: cuda`` where its algorithm has a role that can use a GPU, ``auto``
otherwise. The test checks that the job succeeds, that each rank ran where the algorithm's
device contract says (GPU ranks on NCCL inside their party, CPU-only roles on CPU), and that GPU
ranks reported their GPU memory. ``docs/gpu.md`` records the runs on real GPUs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tessera_ml.registry import all_specs
from tessera_ml.worlds import free_port
from tests.e2e.platform import Platform, start_platform, why
from tests.ml.golden.curves import JOBS

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.serial,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

PARAM_SERVER = (
    [
        {"party": "alice", "role": "server"},
        {"party": "bob", "role": "worker"},
    ],
    {"seed": 3, "steps": 20, "batch_size": 64, "dim": 4, "hidden": [8], "data": {"vocab": 400}},
)


@pytest.fixture(scope="module")
def gpu_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    home: Path = tmp_path_factory.mktemp("tessera-gpu")
    running = start_platform(
        home,
        free_port(),
        database_url=f"sqlite:///{home / 'tessera.db'}",
        broker_url="filesystem://",
        parties="alice,bob,carol",
        workers="alice,bob,carol",
    )
    try:
        yield running
    finally:
        running.stop()


def _job(name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    if name == "param_server":
        return PARAM_SERVER
    golden = JOBS[name]
    return golden.assignments, golden.config


def _gpus_needed(assignments: list[dict[str, Any]]) -> int:
    per_party: dict[str, int] = {}
    for a in assignments:
        per_party[a["party"]] = per_party.get(a["party"], 0) + int(a.get("processes", 1))
    return max(per_party.values())


@pytest.mark.parametrize("name", sorted(all_specs()))
def test_every_algorithm_runs_where_its_device_contract_says(
    gpu_platform: Platform, name: str
) -> None:
    spec = all_specs()[name]
    assignments, config = _job(name)
    if _gpus_needed(assignments) > torch.cuda.device_count():
        pytest.skip(f"a party of this job needs {_gpus_needed(assignments)} GPUs")
    can_use_gpu = any(r.can_use_gpu for r in spec.roles)
    body = {
        "name": f"gpu-{name}",
        "algorithm": name,
        "config": config,
        "assignments": assignments,
        "device": "cuda" if can_use_gpu else "auto",
    }
    job_id = str(gpu_platform.post("/jobs", body)["id"])
    job = gpu_platform.wait_status(job_id, "succeeded", "failed", "cancelled", timeout_s=600)
    assert job["status"] == "succeeded", why(job)

    cuda_ranks = []
    for task in job["attempts"][-1]["tasks"]:
        for rank in task["ranks"]:
            role = spec.role(rank["role"])
            assert role is not None
            on_gpu = rank["device"].startswith("cuda")
            assert on_gpu == role.can_use_gpu, (name, rank)
            assert rank["backend"] == ("nccl" if on_gpu else "gloo")
            if on_gpu:
                cuda_ranks.append(rank["rank"])
    series = gpu_platform.get(f"/jobs/{job_id}/metrics", names="gpu_memory_peak_bytes")["series"]
    reported = {s["rank"] for s in series if s["points"]}
    assert reported == set(cuda_ranks)


def test_a_job_of_cpu_only_roles_cannot_ask_for_a_gpu(gpu_platform: Platform) -> None:
    golden = JOBS["mpc_mixed"]
    body = {
        "name": "gpu-mpc",
        "algorithm": "mpc_mixed",
        "config": golden.config,
        "assignments": golden.assignments,
        "device": "cuda",
    }
    response = gpu_platform.http.post("/jobs", json=body)
    assert response.status_code == 422
    assert response.json()["code"] == "no_gpu_role"
