"""GPU facts of a rank on a CUDA device, reported as metrics while the rank runs.

Every ``interval_s`` the watcher records, at the rank's latest reported step, the memory torch
holds on the rank's device (``gpu_memory_allocated_bytes``, ``gpu_memory_reserved_bytes``,
``gpu_memory_peak_bytes``) and, where NVML answers, the device's utilisation
(``gpu_utilization``, a fraction) and the memory used on it by every process
(``gpu_memory_used_bytes``). A rank on CPU gets no watcher.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from tessera_ml.report import Reporter


class StepTracking:
    """A reporter that remembers the latest step the rank reported (metrics or progress)."""

    def __init__(self, inner: Reporter) -> None:
        self.inner = inner
        self.step = 0

    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        self.step = max(self.step, step)
        self.inner.metrics(step, values)

    def progress(self, step: int, total: int | None) -> None:
        self.step = max(self.step, step)
        self.inner.progress(step, total)

    def log(self, message: str, *, level: str = "info") -> None:
        self.inner.log(message, level=level)

    def checkpoint(self, step: int, uri: str, size: int, sha256: str) -> None:
        self.inner.checkpoint(step, uri, size, sha256)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


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


class GpuWatch:
    """Samples ``read()`` every ``interval_s`` and reports it at the rank's latest step."""

    def __init__(
        self,
        reporter: StepTracking,
        read: Callable[[], dict[str, float]],
        *,
        interval_s: float = 5.0,
    ) -> None:
        self._reporter = reporter
        self._read = read
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpu-watch", daemon=True)

    def __enter__(self) -> GpuWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval_s + 1.0)
        self._report()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._report()

    def _report(self) -> None:
        try:
            values = self._read()
        except Exception as exc:  # a device gone bad must not end the rank from here
            self._reporter.log(f"GPU facts unavailable: {exc}", level="warning")
            self._stop.set()
            return
        if values:
            self._reporter.metrics(self._reporter.step, values)
