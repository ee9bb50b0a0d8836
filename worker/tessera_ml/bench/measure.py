"""Turn the metrics ranks reported into benchmark numbers (per-step bytes, step times)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tessera_ml.worlds import RankOutcome

if TYPE_CHECKING:
    from tessera_ml.netcapture import LinkCapture


def median_step_time(outcome: RankOutcome, warmup: int) -> float:
    """Median ``step_time_s`` after the first ``warmup`` steps (all of them when too few)."""
    times = [v for s, v in outcome.series("step_time_s") if s > warmup]
    times = times or [v for _, v in outcome.series("step_time_s")]
    return statistics.median(times) if times else float("nan")


def per_step_delta(outcome: RankOutcome, name: str, warmup: int) -> float:
    """Growth per step of a cumulative counter between step ``warmup`` and the last report."""
    series = outcome.series(name)
    if len(series) < 2:
        return float("nan")
    after = [(s, v) for s, v in series if s >= warmup] or series
    (s0, v0), (s1, v1) = (after[0], series[-1]) if len(after) > 1 else (series[0], series[-1])
    return (v1 - v0) / max(s1 - s0, 1)


def link_bytes_per_step(
    outcomes: Sequence[RankOutcome], hosts: Sequence[int], warmup: int
) -> float:
    """Bytes per step that left the hosts over their links, from the interface counters.

    Each host's link is read by the lowest rank it holds (its counter covers every rank there).
    """
    readers = {h: hosts.index(h) for h in sorted(set(hosts))}
    return sum(
        per_step_delta(outcomes[rank], "link_bytes_sent", warmup) for rank in readers.values()
    )


def even_hosts(ranks: int, hosts: int) -> list[int]:
    """Contiguous placement of ranks on hosts: ``[0, 0, 1, 1]`` for 4 ranks on 2 hosts."""
    if not 1 <= hosts <= ranks:
        raise ValueError(f"cannot place {ranks} ranks on {hosts} hosts")
    return [r * hosts // ranks for r in range(ranks)]


def plaintext_matches(capture: LinkCapture, outcomes: Sequence[RankOutcome]) -> dict[str, int]:
    """How much of what the ranks sent to other parties in clear (``sample_sent``) a stopped
    capture of a link found: ``plaintext_matches_on_link`` should be 0 under TLS."""
    samples = [s for o in outcomes for s in o.sent_samples]
    return {
        "plaintext_matches_on_link": capture.matches(samples),
        "plaintext_samples": len(samples),
        "captured_tcp_bytes": capture.tcp_bytes(),
    }
