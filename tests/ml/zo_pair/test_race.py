"""The race's time-to-accuracy keys, from what a job's rank 0 reports."""

from __future__ import annotations

import pytest

from tessera_ml.bench.zo_pair.race import ratio_keys, time_to_target
from tessera_ml.report import MetricPoint
from tessera_ml.worlds import RankOutcome


def _outcome(windows: list[tuple[int, float]], accuracies: list[tuple[int, float]]) -> RankOutcome:
    points = [MetricPoint(s, "step_time_s", t, 0.0) for s, t in windows]
    points += [MetricPoint(s, "accuracy", a, 0.0) for s, a in accuracies]
    return RankOutcome(0, "trainer", "bench", None, points, [], [])


def test_time_to_target_sums_the_windows_up_to_the_first_evaluation_at_the_target() -> None:
    # windows of 50 steps at 0.01 s, then 0.02 s; the target is first met at step 100
    run = _outcome([(50, 0.01), (100, 0.02), (150, 0.02)], [(50, 0.7), (100, 0.86), (150, 0.9)])
    got = time_to_target(run, 0.85)
    assert got["time_s"] == pytest.approx(50 * 0.01 + 50 * 0.02)
    assert (got["step"], got["accuracy"], got["best_accuracy"]) == (100, 0.86, 0.9)
    assert got["total_s"] == pytest.approx(50 * 0.01 + 100 * 0.02)


def test_both_reaching_the_target_gives_the_ratio() -> None:
    zo = time_to_target(_outcome([(10, 0.1)], [(10, 0.9)]), 0.85)
    ddp = time_to_target(_outcome([(2, 2.0)], [(2, 0.9)]), 0.85)
    keys = ratio_keys(zo, ddp)
    assert keys == {
        "time_to_accuracy_missed_by": [],
        "time_to_accuracy_ratio_vs_ddp": pytest.approx(1.0 / 4.0),
    }


def test_a_method_that_misses_the_target_is_named_and_bounds_the_ratio() -> None:
    short = _outcome([(10, 0.1)], [(10, 0.8)])  # 1 s of training, below the target
    reaches = _outcome([(2, 2.0)], [(2, 0.9)])  # 4 s to the target
    zo_missed = ratio_keys(time_to_target(short, 0.85), time_to_target(reaches, 0.85))
    assert zo_missed["time_to_accuracy_missed_by"] == ["zo_pair"]
    assert zo_missed["time_to_accuracy_ratio_vs_ddp"] is None
    assert zo_missed["time_to_accuracy_ratio_vs_ddp_at_least"] == pytest.approx(1.0 / 4.0)
    assert "time_to_accuracy_ratio_vs_ddp_at_most" not in zo_missed

    ddp_missed = ratio_keys(time_to_target(reaches, 0.85), time_to_target(short, 0.85))
    assert ddp_missed["time_to_accuracy_missed_by"] == ["ddp"]
    assert ddp_missed["time_to_accuracy_ratio_vs_ddp"] is None
    assert ddp_missed["time_to_accuracy_ratio_vs_ddp_at_most"] == pytest.approx(4.0 / 1.0)

    neither = ratio_keys(time_to_target(short, 0.85), time_to_target(short, 0.85))
    assert neither == {
        "time_to_accuracy_missed_by": ["zo_pair", "ddp"],
        "time_to_accuracy_ratio_vs_ddp": None,
    }
