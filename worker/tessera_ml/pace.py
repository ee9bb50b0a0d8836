"""Emulated device speed on a CPU testbed: a rank that works at a fraction of a core.

A CPU machine cannot give four ranks four devices of different speeds: with fewer cores than
ranks, a rank given fewer threads is not reliably slower than one given more. ``Pace`` slows a
rank by a known factor instead: after each piece of work it sleeps for the CPU time the work
took times ``1/speed - 1``, so the work takes ``1/speed`` times as long while the sleep leaves
the core to the other ranks. Waiting for peers costs no CPU and is not stretched.

The CPU time is the calling thread's (``time.thread_time``), so each of a rank's threads paces
its own work, as every thread of a slower device would be slower: a helper thread that reduces
gradients while the main thread computes is paced in its own ``work`` blocks, and its CPU does
not lengthen the main thread's sleep. ``catch_up`` inside a block sleeps for the work done so
far, at a point where the rank lets others see progress (a bucket of gradients ready), so what
follows it starts when it would on the slower device rather than before the block's one sleep.
Threads that never enter a block (a library's own, such as gloo's) are not paced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Pace:
    def __init__(self, speed: float = 1.0) -> None:
        if not 0.0 < speed <= 1.0:
            raise ValueError(f"pace must be in (0, 1], got {speed}")
        self.speed = speed
        self.slept_s = 0.0
        """Seconds slept so far, over all threads."""
        self._lock = threading.Lock()
        self._local = threading.local()

    def __getstate__(self) -> dict[str, float]:
        return {"speed": self.speed, "slept_s": self.slept_s}

    def __setstate__(self, state: dict[str, float]) -> None:
        """A copy in another process: the same speed, its own lock and per-thread marks."""
        self.speed = state["speed"]
        self.slept_s = state["slept_s"]
        self._lock = threading.Lock()
        self._local = threading.local()

    @contextmanager
    def work(self) -> Iterator[None]:
        """Run the block, then stretch it to ``1/speed`` of this thread's CPU time in it. A
        block inside another on the same thread is part of the outer one."""
        if self.speed == 1.0 or getattr(self._local, "since", None) is not None:
            yield
            return
        self._local.since = time.thread_time()
        try:
            yield
        finally:
            self.catch_up()
            self._local.since = None

    def catch_up(self) -> None:
        """Inside ``work``: sleep for the CPU time this thread has spent since the block
        began or since its last ``catch_up``. Outside a block, nothing."""
        since = getattr(self._local, "since", None)
        if since is None:
            return
        extra = (time.thread_time() - since) * (1.0 / self.speed - 1.0)
        time.sleep(extra)
        with self._lock:
            self.slept_s += extra
        self._local.since = time.thread_time()
