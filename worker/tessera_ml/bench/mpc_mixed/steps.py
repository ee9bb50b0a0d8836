"""How the benchmark times a job's steps: each compute rank's steady steps and their spans, the
span in which every job ran, and a job's medians and quantiles over it."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from tessera_ml.worlds import RankOutcome

MIN_TIMED_STEPS = 5
"""Fewer steps than this in the common span (modes that hardly overlapped): time whole runs."""


@dataclass(frozen=True)
class Step:
    """One steady training step of a compute rank: its span and its times."""

    step: int
    start: float
    end: float
    whole_s: float
    wall_s: float
    cpu_s: float


def steps_of(outcome: RankOutcome) -> list[Step]:
    """A compute rank's steady-state steps with their wall-clock span, from the step's start
    (asking for its material, or waiting for it) to the end of its online phase: all but a
    run's first step, which records the dealer's schedule. A step's metrics are recorded right
    after its online phase, so the point's time is the step's end."""
    cpu = dict(outcome.series("step_cpu_s"))
    online = dict(outcome.series("step_time_s"))
    points = sorted(
        (p for p in outcome.points if p.name == "whole_step_time_s"), key=lambda p: p.step
    )
    return [
        Step(p.step, p.time - p.value, p.time, p.value, online[p.step], cpu[p.step])
        for p in points[1:]
    ]


def compute_ranks(runs: list[list[RankOutcome]]) -> list[list[RankOutcome]]:
    """Per compute party, its outcome in each run."""
    return [[o for run in runs for o in run if o.role == "compute" and o.rank == r] for r in (0, 1)]


def overlap_window(timelines: list[list[Step]]) -> tuple[float, float]:
    """The span in which every job was in its steady state: from the last first step's start to
    the first last step's end (empty when the jobs did not overlap)."""
    start = max(min(s.start for s in t) for t in timelines)
    end = min(max(s.end for s in t) for t in timelines)
    return start, end


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))]


@dataclass(frozen=True)
class StepTimes:
    """Times per step at a quantile of each compute party's steps, the slower party's."""

    whole_s: float
    online_s: float
    cpu_s: float
    steps: int


def step_time(
    runs: list[list[RankOutcome]], window: tuple[float, float] | None, q: float = 0.5
) -> StepTimes:
    """Whole-step, online and CPU time per step at quantile ``q`` (the median by default) of
    each compute party within ``window`` (all steady steps when None), the slower party's; and
    how many steps that is."""
    wholes, walls, cpus, counts = [], [], [], []
    for party in compute_ranks(runs):
        steps = [
            s
            for outcome in party
            for s in steps_of(outcome)
            if window is None or (s.start >= window[0] and s.end <= window[1])
        ]
        if not steps:
            return StepTimes(float("nan"), float("nan"), float("nan"), 0)
        wholes.append(_quantile([s.whole_s for s in steps], q))
        walls.append(_quantile([s.wall_s for s in steps], q))
        cpus.append(_quantile([s.cpu_s for s in steps], q))
        counts.append(len(steps))
    return StepTimes(max(wholes), max(walls), max(cpus), min(counts))


def summarise(
    runs: list[list[RankOutcome]], window: tuple[float, float] | None
) -> dict[str, float]:
    """One job's numbers over its runs (one, or one per block when interleaved)."""
    last = runs[-1]
    compute = next(o for o in last if o.role == "compute" and o.rank == 0)
    fetching = next(o for o in last if o.role == "compute" and o.rank == 1)
    labels = next(o for o in last if o.role == "labels")
    median = step_time(runs, window)
    out = {
        "test_accuracy": float(labels.result["test_accuracy"]),
        "online_bytes_per_step": float(compute.result["online_bytes"]),
        "offline_bytes_per_step": float(fetching.result["offline_bytes"]),
        "rounds_per_step": float(compute.result["online_rounds"]),
        "whole_step_time_s": median.whole_s,
        "whole_step_time_p10_s": step_time(runs, window, 0.1).whole_s,
        "online_step_time_s": median.online_s,
        "online_step_time_p10_s": step_time(runs, window, 0.1).online_s,
        "online_step_time_p90_s": step_time(runs, window, 0.9).online_s,
        "step_cpu_s": median.cpu_s,
        "timed_steps": float(median.steps),
        "offline_time_s": statistics.median(
            v
            for run in runs
            for o in run
            if o.role == "compute" and o.rank == 1
            for _, v in o.series("offline_time_s")[1:]
        ),
        "steps": float(
            sum(next(o for o in run if o.role == "compute").result["steps"] for run in runs)
        ),
    }
    if window is not None:
        whole_run = step_time(runs, None)
        out["whole_step_time_whole_run_s"] = whole_run.whole_s
        out["online_step_time_whole_run_s"] = whole_run.online_s
    if "link_online_bytes" in compute.result:
        out["link_online_bytes_per_step"] = float(compute.result["link_online_bytes"])
    return out
