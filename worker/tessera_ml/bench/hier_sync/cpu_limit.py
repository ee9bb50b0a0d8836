"""Real CPU limits per rank: a CFS bandwidth group per rank, ``share`` of one core each.

cgroup v2 (``cpu.max``) where the unified hierarchy offers the ``cpu`` controller, else the v1
``cpu`` hierarchy (``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``: the same CFS bandwidth
control). ``cpu_groups`` makes the groups (``None`` where neither can be written, e.g. without
root); each rank process joins its own with ``join_cpu_group`` (its threads follow it), and
the groups are removed once the ranks are gone.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

PERIOD_US = 100_000
V2 = Path("/sys/fs/cgroup/unified")
V2_ROOT = Path("/sys/fs/cgroup")
V1 = Path("/sys/fs/cgroup/cpu")


def _v2_root() -> Path | None:
    for root in (V2_ROOT, V2):
        controllers = root / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split():
            return root
    return None


def cpu_limit_kind() -> str | None:
    """``"v2"``, ``"v1"`` or ``None``: which CPU bandwidth limit this machine lets us set."""
    if _v2_root() is not None and os.access(_v2_root() or V2_ROOT, os.W_OK):
        return "v2"
    if (V1 / "cpu.cfs_quota_us").exists() and os.access(V1, os.W_OK):
        return "v1"
    return None


def _limit(group: Path, kind: str, share: float) -> None:
    quota = max(1000, int(share * PERIOD_US))
    if kind == "v2":
        (group / "cpu.max").write_text(f"{quota} {PERIOD_US}")
    else:
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota))


@contextlib.contextmanager
def cpu_groups(
    shares: Sequence[float], prefix: str = "tessera-bench"
) -> Iterator[list[str] | None]:
    """One limited group per rank, ``shares[r]`` of a core for rank ``r``."""
    kind = cpu_limit_kind()
    if kind is None:
        yield None
        return
    root = _v2_root() if kind == "v2" else V1
    assert root is not None
    made: list[Path] = []
    try:
        for rank, share in enumerate(shares):
            group = root / f"{prefix}-{os.getpid()}-{rank}"
            group.mkdir()
            made.append(group)
            _limit(group, kind, share)
        yield [str(g) for g in made]
    finally:
        for group in made:
            _remove(group, root)


def _remove(group: Path, root: Path, patience_s: float = 2.0) -> None:
    """Move what is left in ``group`` to ``root`` and remove it. A process that has just
    exited can keep its group busy for a moment, so the removal is retried for a while."""
    deadline = time.monotonic() + patience_s
    while True:
        with contextlib.suppress(OSError):
            for pid in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (root / "cgroup.procs").write_text(pid)
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.05)


def join_cpu_group(group: str) -> None:
    """Move this process (all its threads) into ``group``."""
    (Path(group) / "cgroup.procs").write_text(str(os.getpid()))
