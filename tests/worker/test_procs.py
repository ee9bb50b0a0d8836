"""The worker's process keeps its memory from the ranks it starts as the same user."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import ctypes, subprocess, sys
from tessera_worker import procs
libc = ctypes.CDLL(None)
before = libc.prctl(3, 0, 0, 0, 0)
made = procs.keep_memory_private()
after = libc.prctl(3, 0, 0, 0, 0)
child = subprocess.run(
    [sys.executable, "-c", "import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"],
    capture_output=True, text=True, check=True,
).stdout.strip()
print(before, made, after, child)
"""


def test_the_worker_is_undumpable_and_the_ranks_it_starts_are_not() -> None:
    said = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    assert said == ["1", "True", "0", "1"]
