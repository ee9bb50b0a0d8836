"""How the hier_sync benchmark reduces per-rank series: per step one value over the ranks
(the slowest, or the shorter of the slow devices' phases), then the median over steps."""

from __future__ import annotations

import pytest

from tessera_ml.bench.hier_sync.jobs import Outcomes, per_step_median, slowest
from tessera_ml.report import MetricPoint
from tessera_ml.worlds import RankOutcome


def outcome(rank: int, values: list[float]) -> RankOutcome:
    points = [MetricPoint(step + 1, "sharded_phase_s", v, 0.0) for step, v in enumerate(values)]
    return RankOutcome(rank, "node", "cluster", None, points, [], [])


# two ranks over five steps; step 1 is warm-up, and the ranks take turns being the longer
OUTCOMES: Outcomes = [
    {"job": outcome(0, [9.0, 1.0, 5.0, 2.0, 7.0])},
    {"job": outcome(1, [9.0, 4.0, 3.0, 6.0, 2.0])},
]


def test_the_slowest_rank_per_step_then_the_median() -> None:
    # per step after warm-up: 4, 5, 6, 7
    assert slowest(OUTCOMES, ["job"], "sharded_phase_s", 1, [0, 1]) == pytest.approx(5.5)


def test_the_shorter_of_the_ranks_per_step_then_the_median() -> None:
    # per step after warm-up: 1, 3, 2, 2; the median of the ranks' own medians would be 3.5
    shorter = per_step_median(OUTCOMES, ["job"], "sharded_phase_s", 1, [0, 1], min)
    assert shorter == pytest.approx(2.0)


def test_steps_are_pooled_over_jobs() -> None:
    # a second job at 8 on both ranks: pooled 4, 5, 6, 7, 8, 8, 8, 8 -> 7.5; the first job
    # alone gives 5.5, the median of the two jobs' medians 6.75
    again: Outcomes = [
        {**o, "again": outcome(r, [9.0, 8.0, 8.0, 8.0, 8.0])} for r, o in enumerate(OUTCOMES)
    ]
    assert slowest(again, ["job", "again"], "sharded_phase_s", 1, [0, 1]) == pytest.approx(7.5)
    # warm-up counts per job: rank 1 after step 3 gives 6, 2, 8, 8
    assert slowest(again, ["job", "again"], "sharded_phase_s", 3, [1]) == pytest.approx(7.0)
