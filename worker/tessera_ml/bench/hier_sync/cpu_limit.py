"""Real CPU limits per rank: a CFS bandwidth group per rank, ``share`` of one core each.

cgroup v2 (``cpu.max``) where the unified hierarchy gives its groups the ``cpu`` controller,
else the v1 ``cpu`` hierarchy (``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``: the same CFS
bandwidth control). A group runs at most ``share * period_us`` microseconds in each period of
``period_us``; a shorter period spreads the same share more evenly over a step. A quota only
caps a period's total: while more ranks want to run than there are cores, the scheduler splits
the cores by weight, so each group's weight (``cpu.weight``, v1 ``cpu.shares``) is also set in
proportion to its share, and a rank given half the share runs at half the speed of the others
at every moment, not only once they have used their quota. ``cpu_groups``
makes the groups (``None`` where neither can be written, e.g. without root); each rank process
joins its own with ``join_cpu_group`` (its threads follow it), and the groups are removed once
the ranks are gone.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

PERIOD_US = 100_000
"""The kernel's default CFS period."""
MIN_QUOTA_US = 1_000
"""The smallest quota the kernel takes."""
PERIODS_US = (1_000, 1_000_000)
"""The shortest and longest CFS period the kernel takes."""
V2 = Path("/sys/fs/cgroup/unified")
V2_ROOT = Path("/sys/fs/cgroup")
V1 = Path("/sys/fs/cgroup/cpu")


def _v2_root() -> Path | None:
    """The unified hierarchy's root where it gives its child groups the ``cpu`` controller.
    A root may offer ``cpu`` (``cgroup.controllers``) without handing it to its children
    (``cgroup.subtree_control``); its groups then have no ``cpu.max``, and that is not
    changed here, since it would change how the host's other groups share the CPU."""
    for root in (V2_ROOT, V2):
        handed_down = root / "cgroup.subtree_control"
        if handed_down.exists() and "cpu" in handed_down.read_text().split():
            return root
    return None


def cpu_limit_kind() -> str | None:
    """``"v2"``, ``"v1"`` or ``None``: which CPU bandwidth limit this machine lets us set."""
    if (root := _v2_root()) is not None and os.access(root, os.W_OK):
        return "v2"
    if (V1 / "cpu.cfs_quota_us").exists() and os.access(V1, os.W_OK):
        return "v1"
    return None


def quota_us(share: float, period_us: int) -> int:
    """The quota that gives ``share`` of a core per period; a share the kernel cannot express
    in that period is refused rather than rounded up."""
    shortest, longest = PERIODS_US
    if not shortest <= period_us <= longest:
        raise ValueError(
            f"a CFS period of {period_us} us is outside the kernel's {shortest} to {longest} us"
        )
    quota = round(share * period_us)
    if quota < MIN_QUOTA_US:
        raise ValueError(
            f"a share of {share:g} core in a {period_us} us period is a quota of {quota} us, "
            f"below the kernel's minimum of {MIN_QUOTA_US} us: use a longer period"
        )
    return quota


DEFAULT_WEIGHT = {"v2": 100, "v1": 1024}
"""A group's weight when nothing is set: ``cpu.weight`` (v2), ``cpu.shares`` (v1)."""


def weight(share: float, largest: float, kind: str) -> int:
    """The group's weight: the default for the largest share, the rest in proportion."""
    return max(2, round(DEFAULT_WEIGHT[kind] * share / largest))


def _limit(group: Path, kind: str, share: float, largest: float, period_us: int) -> None:
    quota = quota_us(share, period_us)
    if kind == "v2":
        (group / "cpu.max").write_text(f"{quota} {period_us}")
        (group / "cpu.weight").write_text(str(weight(share, largest, kind)))
    else:
        (group / "cpu.cfs_period_us").write_text(str(period_us))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
        (group / "cpu.shares").write_text(str(weight(share, largest, kind)))


@contextlib.contextmanager
def cpu_groups(
    shares: Sequence[float], period_us: int = PERIOD_US, prefix: str = "tessera-bench"
) -> Iterator[list[str] | None]:
    """One limited group per rank, ``shares[r]`` of a core in each ``period_us`` for rank
    ``r``, weighted in proportion to ``shares[r]``."""
    for share in shares:
        quota_us(share, period_us)
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
            _limit(group, kind, share, max(shares), period_us)
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
