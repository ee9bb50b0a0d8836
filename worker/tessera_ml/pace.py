"""Emulated device speed on a CPU testbed: a rank that works at a fraction of a core.

A CPU machine cannot give four ranks four devices of different speeds: with fewer cores than
ranks, a rank given fewer threads is not reliably slower than one given more. ``Pace`` slows a
rank by a known factor instead: after each piece of work it sleeps for the CPU time the work
took times ``1/speed - 1``, so the work takes ``1/speed`` times as long while the sleep leaves
the core to the other ranks. The CPU time is the process's (all its threads), measured with
``time.process_time``; waiting for peers costs no CPU and is not stretched.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Pace:
    def __init__(self, speed: float = 1.0) -> None:
        if not 0.0 < speed <= 1.0:
            raise ValueError(f"pace must be in (0, 1], got {speed}")
        self.speed = speed
        self.slept_s = 0.0

    @contextmanager
    def work(self) -> Iterator[None]:
        """Run the block, then stretch it to ``1/speed`` of its CPU time."""
        if self.speed == 1.0:
            yield
            return
        began = time.process_time()
        try:
            yield
        finally:
            extra = (time.process_time() - began) * (1.0 / self.speed - 1.0)
            time.sleep(extra)
            self.slept_s += extra


def pace_option(options: dict[str, Any], local_index: int) -> float:
    """The ``pace`` option of a process: a list with one speed per process, default 1."""
    configured = options.get("pace")
    if configured is None:
        return 1.0
    if not isinstance(configured, list) or len(configured) <= local_index:
        raise ValueError("option pace must be a list with one speed in (0, 1] per process")
    return float(configured[local_index])
