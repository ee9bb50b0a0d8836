"""The benchmark's real CPU limits (``hier_sync``'s proportional slicing): a process in a group
gets no more than its share of a core, processes that contend for one core split it in
proportion to their shares, and the groups are gone afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tessera_ml.bench.hier_sync import cpu_limit
from tessera_ml.bench.hier_sync.cpu_limit import (
    MIN_QUOTA_US,
    PERIOD_US,
    V1,
    V2,
    V2_ROOT,
    cpu_groups,
    cpu_limit_kind,
    quota_us,
    weight,
)

# shares of a core are measured against whatever else runs on it
pytestmark = pytest.mark.serial

limits = pytest.mark.skipif(
    cpu_limit_kind() is None, reason="this machine lets no CPU bandwidth limit be set"
)

BUSY = """
import os, sys, time
from tessera_ml.bench.hier_sync.cpu_limit import join_cpu_group
group, cpu, begin, wall_s = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
join_cpu_group(group)
if cpu:
    os.sched_setaffinity(0, {int(cpu)})
time.sleep(max(begin - time.monotonic(), 0))
start, end = time.process_time(), max(begin, time.monotonic()) + wall_s
while time.monotonic() < end:
    pass
print(time.process_time() - start)
"""
"""A busy loop in group ``argv[1]``, on CPU ``argv[2]`` if one is named, from monotonic time
``argv[3]`` (or at once) for ``argv[4]`` seconds; prints the CPU seconds it got."""


def _busy_cpu_s(group: str, wall_s: float) -> float:
    """CPU seconds a busy loop of ``wall_s`` got inside ``group``."""
    out = subprocess.run(
        [sys.executable, "-c", BUSY, group, "", "0", str(wall_s)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return float(out.stdout.strip())


@limits
@pytest.mark.parametrize("period_us", [PERIOD_US, 10_000])
def test_a_busy_process_gets_at_most_its_share_and_the_groups_go_afterwards(
    period_us: int,
) -> None:
    share, wall_s = 0.2, 1.5
    with cpu_groups([share, 1.0], period_us) as groups:
        assert groups is not None and len(groups) == 2
        limited = _busy_cpu_s(groups[0], wall_s)
        free = _busy_cpu_s(groups[1], wall_s)
    # the quota bounds CPU time from above whatever else runs: at most `share` of every
    # period the loop spans, one more period at most for where it starts and ends
    slack_s = 2 * share * period_us / 1e6 + 0.05
    assert limited <= share * wall_s + slack_s
    # a whole core's quota lets the same loop run well past that share
    assert free > limited
    assert not any(Path(g).exists() for g in groups)


@limits
def test_two_processes_on_one_core_split_it_in_proportion_to_their_shares() -> None:
    """A full share and a half share, both busy on the same core: the quotas alone (a core's
    period and half of it) would let them share it evenly, the weights give 2:1."""
    core = min(os.sched_getaffinity(0))
    begin = time.monotonic() + 2.0  # both loops run over the same 1.5 s
    with cpu_groups([1.0, 0.5]) as groups:
        assert groups is not None
        loops = [
            subprocess.Popen(
                [sys.executable, "-c", BUSY, group, str(core), str(begin), "1.5"],
                stdout=subprocess.PIPE,
                text=True,
            )
            for group in groups
        ]
        full, half = (float(loop.communicate(timeout=60)[0].strip()) for loop in loops)
    # 2:1 gives the half share 0.5 of the full one's time, an even split 1.0
    assert half < 0.75 * full, (full, half)


def test_weights_follow_the_shares() -> None:
    assert weight(0.3, 0.3, "v1") == 1024
    assert weight(0.15, 0.3, "v1") == 512
    assert weight(0.15, 0.3, "v2") == 50
    assert weight(0.0001, 1.0, "v2") == 2


def test_a_share_too_small_for_the_period_is_refused_before_any_group_is_made() -> None:
    assert quota_us(0.15, 10_000) == 1_500
    with pytest.raises(ValueError, match="below the kernel's minimum"):
        quota_us(0.15, 5_000)
    for period_us in (999, 1_000_001):
        with pytest.raises(ValueError, match="outside the kernel's"):
            quota_us(1.0, period_us)
    prefix = "tessera-refused"
    with (
        pytest.raises(ValueError, match=f"minimum of {MIN_QUOTA_US} us"),
        cpu_groups([0.3, 0.15], 5_000, prefix=prefix),
    ):
        pass
    roots = [V1, V2_ROOT, V2]
    assert not [g for root in roots if root.is_dir() for g in root.glob(f"{prefix}-*")]


@pytest.mark.parametrize(
    ("subtree_control", "kind"), [("cpuset cpu io memory pids", "v2"), ("io memory pids", None)]
)
def test_v2_is_used_only_where_the_root_hands_the_cpu_controller_to_its_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, subtree_control: str, kind: str | None
) -> None:
    """A unified root that offers ``cpu`` but does not hand it down gives its groups no
    ``cpu.max``: no v2 limit there (and, with no v1 ``cpu`` hierarchy either, none at all)."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text(subtree_control + "\n")
    monkeypatch.setattr(cpu_limit, "V2_ROOT", root)
    monkeypatch.setattr(cpu_limit, "V2", tmp_path / "no-unified")
    monkeypatch.setattr(cpu_limit, "V1", tmp_path / "no-v1")
    assert cpu_limit_kind() == kind
