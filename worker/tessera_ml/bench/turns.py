"""Jobs on one machine taking turns, step by step, for the benchmark's ``turns`` schedule.

The compute parties of every job given one lock file run their steps one job at a time: member
1 of a pair takes an exclusive lock on the file before a step (or an evaluation) asks for its
material, member 0 waits for it where the pair meets, both start the step once both are
running, and member 1 lets go once the step's online phase is over. Jobs started side by
side then meet the machine's slow and fast moments alike, step by step, and no online phase
runs beside another job's work.

Each member also keeps to one CPU for the whole job (``keep_to_cpu``), member ``i`` to CPU
``i`` modulo their number, as if each had a machine of its own: left to the scheduler, two
processes that wake each other at every round can end up on one CPU while the other idles.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def keep_to_cpu(index: int) -> None:
    """Keep member ``index`` to one CPU; call once, before its first step."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[index % len(cpus)]})


@contextmanager
def turn(path: str, index: int, meet: Callable[[], None]) -> Iterator[None]:
    """Hold the machine for the block: member ``index`` of a pair that meets with ``meet``.

    The pair meets twice. Member 0 met long before, while other jobs took their turns, and
    sleeps; the first meeting wakes it, but member 1 gets member 0's old answer at once and
    would start the block while member 0 is still waking up, charging the block with a wake-up
    that only taking turns causes. Member 1's second meeting ends only once member 0 is
    running."""
    if index == 0:
        meet()  # returns once member 1 holds the lock
        meet()
        yield
        return
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            meet()
            meet()
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
