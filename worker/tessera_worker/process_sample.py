"""CPU and memory of the rank's own process, for ``MetricWatch``: ``cpu_seconds`` (user and
system time of all its threads so far), ``cpu_percent`` (CPU time per wall time since the last
sample, 100 being one core busy) and ``memory_rss_bytes`` (resident memory now)."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from pathlib import Path

STATM = Path("/proc/self/statm")


def resident_bytes() -> float:
    """Resident memory now (Linux), or the peak so far where ``/proc`` is missing."""
    try:
        return float(int(STATM.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return float(peak * 1024)  # kilobytes on Linux


class ProcessSample:
    """Each call returns the figures of the module's docstring."""

    def __init__(
        self,
        cpu: Callable[[], float] = time.process_time,
        wall: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cpu = cpu
        self._wall = wall
        self._last = (cpu(), wall())

    def __call__(self) -> dict[str, float]:
        cpu, wall = self._cpu(), self._wall()
        last_cpu, last_wall = self._last
        self._last = (cpu, wall)
        values = {"cpu_seconds": cpu, "memory_rss_bytes": resident_bytes()}
        if wall > last_wall:
            values["cpu_percent"] = 100.0 * max(0.0, cpu - last_cpu) / (wall - last_wall)
        return values
