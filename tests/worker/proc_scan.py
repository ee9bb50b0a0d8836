"""Find live processes by a string in their command line (reading /proc)."""

from __future__ import annotations

import os
import time
from pathlib import Path

HELPER = "tessera_worker.confine"
"""In the command line of the two processes around a confined rank (its helper and its
namespace's first process), not in the rank's own."""


def pids_with(marker: str, *, ranks_only: bool = False) -> list[int]:
    """The live processes whose command line holds ``marker``; with ``ranks_only``, not the
    processes around a confined rank."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if ranks_only and HELPER in cmdline:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def wait_until_gone(marker: str, timeout_s: float) -> list[int]:
    """Wait for every process matching ``marker`` to exit; returns the survivors."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = pids_with(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def wait_for(marker: str, count: int, timeout_s: float) -> list[int]:
    """Wait until ``count`` ranks match ``marker``; returns them."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = pids_with(marker, ranks_only=True)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
