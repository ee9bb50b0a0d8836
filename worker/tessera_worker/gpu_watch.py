"""GPU facts of a rank on a CUDA device, reported as metrics while the rank runs.

Every ``interval_s`` the watcher records, at the rank's latest reported step, the memory torch
holds on the rank's device (``gpu_memory_allocated_bytes``, ``gpu_memory_reserved_bytes``,
``gpu_memory_peak_bytes``) and, where NVML answers, the device's utilisation
(``gpu_utilization``, a fraction) and the memory used on it by every process
(``gpu_memory_used_bytes``). A rank on CPU gets no watcher.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tessera_worker.metric_watch import MetricWatch, StepTracking

__all__ = ["GpuWatch", "StepTracking", "sample"]


def sample(device: Any) -> dict[str, float]:
    """The device's memory figures from torch, and NVML's where it answers."""
    import torch

    values = {
        "gpu_memory_allocated_bytes": float(torch.cuda.memory_allocated(device)),
        "gpu_memory_reserved_bytes": float(torch.cuda.memory_reserved(device)),
        "gpu_memory_peak_bytes": float(torch.cuda.max_memory_allocated(device)),
    }
    values.update(_nvml(device))
    return values


def _nvml(device: Any) -> dict[str, float]:
    import torch

    try:
        percent = torch.cuda.utilization(device)
        used = torch.cuda.device_memory_used(device)
    except Exception:  # no NVML (pynvml not installed, or no driver library): torch facts only
        return {}
    return {"gpu_utilization": percent / 100.0, "gpu_memory_used_bytes": float(used)}


class GpuWatch(MetricWatch):
    """Samples ``read()`` every ``interval_s`` and reports it at the rank's latest step."""

    def __init__(
        self,
        reporter: StepTracking,
        read: Callable[[], dict[str, float]],
        *,
        interval_s: float = 5.0,
    ) -> None:
        super().__init__(reporter, read, interval_s=interval_s, what="GPU facts")
