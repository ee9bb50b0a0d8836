"""The benchmark's bookkeeping: which steps it times, which job each mode is judged by, and its
options."""

from __future__ import annotations

import pytest

from tessera_ml.bench.api import BenchArgs
from tessera_ml.bench.mpc_mixed import bench, steps
from tessera_ml.report import MetricPoint
from tessera_ml.worlds import RankOutcome


def _rank(rank: int, steps: list[tuple[int, float, float]]) -> RankOutcome:
    """A compute rank that reported (step, end time, whole-step seconds), with an online phase
    of half the whole step and CPU time of a quarter."""
    points = []
    for step, end, whole in steps:
        points += [
            MetricPoint(step, "whole_step_time_s", whole, end),
            MetricPoint(step, "step_time_s", whole / 2, end),
            MetricPoint(step, "step_cpu_s", whole / 4, end),
        ]
    return RankOutcome(rank, "compute", "p", None, points, [], [])


def test_every_runs_first_step_is_left_out_and_spans_run_from_asking_for_material() -> None:
    first = _rank(0, [(0, 1.0, 0.5), (1, 2.0, 0.4), (2, 3.0, 0.3)])
    resumed = _rank(0, [(3, 10.0, 0.9), (4, 11.0, 0.2)])
    timed = [s for o in (first, resumed) for s in steps.steps_of(o)]
    assert [(s.step, s.start, s.end) for s in timed] == [
        (1, 1.6, 2.0),
        (2, 2.7, 3.0),
        (4, 10.8, 11.0),
    ]
    assert (timed[0].whole_s, timed[0].wall_s, timed[0].cpu_s) == (0.4, 0.2, 0.1)


def test_side_by_side_times_only_the_span_in_which_every_mode_ran() -> None:
    # mode A runs from t=0 to t=10, mode B from t=4 to t=20 (one step a second)
    a = [_rank(r, [(k, float(k + 1), 1.0) for k in range(10)]) for r in (0, 1)]
    b = [
        _rank(r, [(k, float(k + 5), 0.5 if k + 5 <= 10 else 0.1) for k in range(16)])
        for r in (0, 1)
    ]
    timelines = [steps.steps_of(o) for o in a + b]
    window = steps.overlap_window(timelines)
    assert window == (5.5, 10.0)  # B's first steady step starts at 5.5; A ends at 10
    times = steps.step_time([b], window)
    assert (times.whole_s, times.online_s, times.cpu_s, times.steps) == (0.5, 0.25, 0.125, 5)
    assert steps.step_time([b], None).whole_s == 0.1  # B's fast steps after A ended


def _results(whole: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for i, (name, seconds) in enumerate(whole.items()):
        for key in bench.HEADLINE:
            out[f"{name}_{key}"] = float(i + 1)
        out[f"{name}_whole_step_time_s"] = seconds
        out[f"{name}_test_accuracy"] = 0.9
    return out


def test_each_mode_is_judged_by_its_job_with_the_lowest_whole_step() -> None:
    whole = {
        "mixed_tree": 0.09,
        "mixed_fan_in": 0.08,
        "mixed_local_tree": 0.095,
        "mixed_local_fan_in": 0.085,
        "all64_local_tree": 0.12,
        "all64_local_fan_in": 0.10,
        "all64_masked_tree": 0.11,
        "all32": 0.01,
        "gloo": 0.01,
    }
    assert set(whole) == set(bench.JOBS)
    out = bench.headline(_results(whole), dict(bench.JOBS), plaintext=0.95)
    assert (out["mixed_job"], out["mixed_comparison"]) == ("mixed_fan_in", "fan_in")
    assert out["mixed_truncation"] == "masked"
    assert (out["all64_job"], out["all64_truncation"]) == ("all64_local_fan_in", "local")
    assert out["whole_step_time_ratio"] == pytest.approx(0.8)
    assert out["whole_step_time_ratio_vs_all64_masked"] == pytest.approx(0.08 / 0.11)
    assert out["accuracy_gap_points"] == pytest.approx(5.0)
    # the other keys come from the same jobs: mixed_fan_in is the 2nd job, all64_local_fan_in
    # the 6th
    assert out["online_bytes_ratio"] == pytest.approx(2 / 6)
    # mixed's default (masked) truncation won, so its masked_mixed ratios are the headline's
    assert out["masked_mixed_job"] == "mixed_fan_in"
    assert out["masked_mixed_whole_step_time_ratio"] == pytest.approx(0.8)
    # local truncation wins mixed too: the headline follows it, the masked_mixed keys do not
    whole["mixed_local_tree"] = 0.07
    out = bench.headline(_results(whole), dict(bench.JOBS), plaintext=0.95)
    assert (out["mixed_job"], out["mixed_truncation"]) == ("mixed_local_tree", "local")
    assert out["whole_step_time_ratio"] == pytest.approx(0.7)
    assert out["online_bytes_ratio"] == pytest.approx(3 / 6)
    assert out["masked_mixed_job"] == "mixed_fan_in"
    assert out["masked_mixed_whole_step_time_ratio"] == pytest.approx(0.8)
    assert out["masked_mixed_online_bytes_ratio"] == pytest.approx(2 / 6)
    # a slower local baseline loses to the masked one
    whole["all64_local_fan_in"] = whole["all64_local_tree"] = 0.2
    out = bench.headline(_results(whole), dict(bench.JOBS), plaintext=0.95)
    assert (out["all64_job"], out["all64_truncation"]) == ("all64_masked_tree", "masked")
    # every job is 5 points below plaintext here: all are named, and the fastest still speaks
    assert out["mixed_jobs_off_accuracy"] == list(bench.CANDIDATES["mixed"])


def test_a_job_that_did_not_train_to_within_a_point_of_plaintext_is_passed_over() -> None:
    whole = {name: 0.1 for name in bench.JOBS}
    whole["mixed_local_tree"] = 0.07  # the fastest, but it met a wrong truncation
    whole["mixed_tree"] = 0.08
    whole["all64_local_fan_in"] = 0.09
    results = _results(whole)
    for name in bench.JOBS:
        results[f"{name}_test_accuracy"] = 0.975
    results["mixed_local_tree_test_accuracy"] = 0.1347
    results["all64_local_fan_in_test_accuracy"] = 0.96  # 1.5 points below
    out = bench.headline(results, dict(bench.JOBS), plaintext=0.98)
    assert out["mixed_job"] == out["masked_mixed_job"] == "mixed_tree"
    assert out["mixed_jobs_off_accuracy"] == ["mixed_local_tree"]
    assert out["all64_jobs_off_accuracy"] == ["all64_local_fan_in"]
    assert out["all64_job"] in ("all64_local_tree", "all64_masked_tree")
    assert out["whole_step_time_ratio"] == pytest.approx(0.8)
    assert out["accuracy_gap_points"] == pytest.approx(0.5)
    # the masked pick passes over a diverged job too: mixed_tree (0.08) before mixed_fan_in (0.1)
    results["mixed_tree_test_accuracy"] = 0.5
    out = bench.headline(results, dict(bench.JOBS), plaintext=0.98)
    assert out["masked_mixed_job"] == "mixed_fan_in"
    assert out["mixed_jobs_off_accuracy"] == ["mixed_tree", "mixed_local_tree"]
    # where no job of a mode trained that well, its fastest speaks for it, and its gap shows
    for name in bench.CANDIDATES["mixed"]:
        results[f"{name}_test_accuracy"] = 0.5
    out = bench.headline(results, dict(bench.JOBS), plaintext=0.98)
    assert out["mixed_job"] == "mixed_local_tree"
    assert out["mixed_jobs_off_accuracy"] == list(bench.CANDIDATES["mixed"])
    assert out["accuracy_gap_points"] == pytest.approx(48.0)


def test_options_are_checked_and_one_comparison_keeps_its_jobs() -> None:
    assert bench._schedule(BenchArgs()) == "turns"
    assert bench._schedule(BenchArgs(extra={"sequential": "1"})) == "sequential"
    with pytest.raises(ValueError, match="schedule must be one of"):
        bench._schedule(BenchArgs(extra={"schedule": "parallel"}))
    with pytest.raises(ValueError, match="block_epochs must be at least 1"):
        bench.bench(BenchArgs(extra={"block_epochs": "0"}))
    with pytest.raises(ValueError, match="comparison must be tree or fan_in"):
        bench.jobs_of(BenchArgs(extra={"comparison": "ripple"}))
    assert set(bench.jobs_of(BenchArgs(extra={"comparison": "fan_in"}))) == {
        "mixed_fan_in",
        "mixed_local_fan_in",
        "all64_local_fan_in",
    }
    # each mode's candidates run in its rings, and both modes choose from the same
    # comparisons and truncations (all64 from every one but fan_in with masked truncation)
    for mode in ("mixed", "all64"):
        assert all(bench.JOBS[n].mode == mode for n in bench.CANDIDATES[mode])
    options = {
        mode: {(bench.JOBS[n].comparison, bench.JOBS[n].truncation) for n in names}
        for mode, names in bench.CANDIDATES.items()
    }
    assert options["mixed"] == {(c, t) for c in ("tree", "fan_in") for t in ("masked", "local")}
    assert options["all64"] == options["mixed"] - {("fan_in", "masked")}


def test_tls_counts_only_when_every_compute_rank_of_every_run_crossed_in_tls() -> None:
    def run(*flags: bool) -> list[RankOutcome]:
        return [
            RankOutcome(r, "compute", "p", {"cross_party_tls": f}, [], [], [])
            for r, f in enumerate(flags)
        ] + [RankOutcome(2, "dealer", "d", {}, [], [], [])]

    assert bench._cross_party_tls([run(True, True), run(True, True)])
    assert not bench._cross_party_tls([run(True, True), run(True, False)])
    # the baseline the TLS job is compared with is the same job, over one plaintext world
    gloo, mixed = bench.JOBS["gloo"], bench.JOBS["mixed_tree"]
    assert (gloo.mode, gloo.comparison, gloo.truncation) == (
        mixed.mode,
        mixed.comparison,
        mixed.truncation,
    )
    assert (gloo.transport, mixed.transport) == ("gloo", "mesh")
