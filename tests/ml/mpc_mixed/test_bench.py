"""The benchmark's bookkeeping: which steps it times, and its options."""

from __future__ import annotations

import pytest

from tessera_ml.bench.api import BenchArgs
from tessera_ml.bench.mpc_mixed import bench
from tessera_ml.report import MetricPoint
from tessera_ml.worlds import RankOutcome


def _rank(rank: int, steps: list[tuple[int, float, float]]) -> RankOutcome:
    """A compute rank that reported (step, end time, wall seconds) with CPU = wall / 2."""
    points = []
    for step, end, wall in steps:
        points += [
            MetricPoint(step, "step_time_s", wall, end),
            MetricPoint(step, "step_cpu_s", wall / 2, end),
        ]
    return RankOutcome(rank, "compute", "p", None, points, [], [])


def test_every_runs_first_step_is_left_out_and_spans_end_at_the_point() -> None:
    first = _rank(0, [(0, 1.0, 0.5), (1, 2.0, 0.4), (2, 3.0, 0.3)])
    resumed = _rank(0, [(3, 10.0, 0.9), (4, 11.0, 0.2)])
    steps = [s for o in (first, resumed) for s in bench._steps(o)]
    assert [(s.step, s.start, s.end) for s in steps] == [
        (1, 1.6, 2.0),
        (2, 2.7, 3.0),
        (4, 10.8, 11.0),
    ]


def test_side_by_side_times_only_the_span_in_which_every_mode_ran() -> None:
    # mode A runs from t=0 to t=10, mode B from t=4 to t=20 (one step a second)
    a = [_rank(r, [(k, float(k + 1), 1.0) for k in range(10)]) for r in (0, 1)]
    b = [
        _rank(r, [(k, float(k + 5), 0.5 if k + 5 <= 10 else 0.1) for k in range(16)])
        for r in (0, 1)
    ]
    timelines = [bench._steps(o) for o in a + b]
    window = bench.overlap_window(timelines)
    assert window == (5.5, 10.0)  # B's first steady step starts at 5.5; A ends at 10
    wall, cpu, steps = bench._step_time([b], window)
    assert (wall, cpu, steps) == (0.5, 0.25, 5)  # B's fast steps after A ended are left out
    assert bench._step_time([b], None)[0] == 0.1


def test_schedule_and_block_options_are_checked() -> None:
    assert bench._schedule(BenchArgs()) == "turns"
    assert bench._schedule(BenchArgs(extra={"sequential": "1"})) == "sequential"
    with pytest.raises(ValueError, match="schedule must be one of"):
        bench._schedule(BenchArgs(extra={"schedule": "parallel"}))
    with pytest.raises(ValueError, match="block_epochs must be at least 1"):
        bench.bench(BenchArgs(extra={"block_epochs": "0"}))


def test_tls_counts_only_when_every_compute_rank_of_every_run_crossed_in_tls() -> None:
    def run(*flags: bool) -> list[RankOutcome]:
        return [
            RankOutcome(r, "compute", "p", {"cross_party_tls": f}, [], [], [])
            for r, f in enumerate(flags)
        ] + [RankOutcome(2, "dealer", "d", {}, [], [], [])]

    assert bench._cross_party_tls([run(True, True), run(True, True)])
    assert not bench._cross_party_tls([run(True, True), run(True, False)])
    # the baseline the TLS job is compared with is the same job, over one plaintext world
    assert bench.JOBS["gloo"] == (bench.JOBS["mixed"][0], "gloo")
    assert bench.JOBS["mixed"][1] == "mesh"
