"""Jobs on one machine taking turns, step by step, for the benchmark's ``turns`` schedule.

With ``TURNS_ENV`` set to a file path, the compute parties of every job given that path run
their steps one job at a time: party 1 takes an exclusive lock on the file before a step (or an
evaluation) asks for its material, party 0 waits for it at the link, and party 1 lets go once
the step's online phase is over. Jobs started side by side then meet the machine's slow and
fast moments alike, step by step, and no online phase runs beside another job's work.

Each compute party also keeps to one CPU for the whole job (``keep_to_cpu``), party ``i`` to
CPU ``i`` modulo their number, as if each had a machine of its own: left to the scheduler, two
parties that wake each other at every round can end up on one CPU while the other idles.
Without the variable (a platform job), neither function does anything.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from tessera_ml.algorithms.mpc_mixed.channel import Peer

TURNS_ENV = "TESSERA_MPC_TURNS"


def keep_to_cpu(index: int) -> None:
    """Under turns, keep compute party ``index`` to one CPU; call once, before its first step."""
    if os.environ.get(TURNS_ENV):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[index % len(cpus)]})


@contextmanager
def turn(index: int, peer: Peer) -> Iterator[None]:
    """Hold the machine for the block: compute party ``index`` of this job, ``peer`` its link
    to the other one."""
    path = os.environ.get(TURNS_ENV)
    if not path:
        yield
        return
    if index == 0:
        peer.barrier()  # returns once party 1 holds the lock
        yield
        return
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            peer.barrier()
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
