"""docker-compose.yml runs on a CPU-only host; docker-compose.gpu.yml adds the GPUs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _services(name: str) -> dict[str, Any]:
    document = yaml.safe_load((ROOT / name).read_text())
    services: dict[str, Any] = document["services"]
    return services


def _gpus(service: dict[str, Any]) -> list[Any]:
    reservations = service.get("deploy", {}).get("resources", {}).get("reservations", {})
    devices: list[Any] = reservations.get("devices", [])
    return devices


def test_the_base_file_reserves_no_gpu_and_builds_the_cpu_torch() -> None:
    services = _services("docker-compose.yml")
    assert all(_gpus(s) == [] for s in services.values())
    args = services["worker-alice"]["build"]["args"]
    assert "whl/cpu" in args["TORCH_INDEX_URL"]


def test_the_gpu_override_gives_every_worker_the_gpus_and_a_cuda_build() -> None:
    base, gpu = _services("docker-compose.yml"), _services("docker-compose.gpu.yml")
    assert set(gpu) <= set(base)
    workers = {name for name in base if name.startswith("worker-")}
    assert workers and workers <= set(gpu)
    for name in workers:
        assert _gpus(gpu[name]) == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    for name, service in gpu.items():
        assert "whl/cu" in service["build"]["args"]["TORCH_INDEX_URL"], name
