"""The benchmark's real CPU limits (``hier_sync``'s proportional slicing): a process in a group
gets no more than its share of a core, and the groups are gone afterwards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tessera_ml.bench.hier_sync.cpu_limit import PERIOD_US, cpu_groups, cpu_limit_kind

pytestmark = pytest.mark.skipif(
    cpu_limit_kind() is None, reason="this machine lets no CPU bandwidth limit be set"
)

BUSY = """
import sys, time
from tessera_ml.bench.hier_sync.cpu_limit import join_cpu_group
join_cpu_group(sys.argv[1])
start = time.process_time()
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    pass
print(time.process_time() - start)
"""


def _busy_cpu_s(group: str, wall_s: float) -> float:
    """CPU seconds a busy loop of ``wall_s`` got inside ``group``."""
    out = subprocess.run(
        [sys.executable, "-c", BUSY, group, str(wall_s)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return float(out.stdout.strip())


def test_a_busy_process_gets_at_most_its_share_and_the_groups_go_afterwards() -> None:
    share, wall_s = 0.2, 1.5
    with cpu_groups([share, 1.0]) as groups:
        assert groups is not None and len(groups) == 2
        limited = _busy_cpu_s(groups[0], wall_s)
        free = _busy_cpu_s(groups[1], wall_s)
    # the quota bounds CPU time from above whatever else runs: at most `share` of every
    # period the loop spans, one more period at most for where it starts and ends
    slack_s = 2 * share * PERIOD_US / 1e6 + 0.05
    assert limited <= share * wall_s + slack_s
    # a whole core's quota lets the same loop run well past that share
    assert free > limited
    assert not any(Path(g).exists() for g in groups)
