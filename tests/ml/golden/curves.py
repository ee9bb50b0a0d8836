"""The golden jobs, how to run one as the platform does, and how to compare loss curves.

A curve is the list of ``(step, loss)`` points that one rank of a job reported as its ``loss``
metric. Each golden job is small and seeded, runs on a real local world of processes
(``run_algorithm``, one torch thread per rank) and has its own tolerance.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tessera_ml.worlds import run_algorithm

FOLDER = Path(__file__).resolve().parent
REGENERATE = ".venv/bin/python -m tests.ml.golden"

Curve = list[tuple[int, float]]


@dataclass(frozen=True)
class Tolerance:
    """A fresh loss ``f`` matches a golden loss ``g`` when ``|f - g| <= atol + rtol * |g|``."""

    rtol: float
    atol: float
    why: str = ""

    def allowed(self, golden: float) -> float:
        return self.atol + self.rtol * abs(golden)

    def as_json(self) -> dict[str, Any]:
        return {
            "rtol": self.rtol,
            "atol": self.atol,
            "rule": "|loss - golden| <= atol + rtol * |golden| at every step",
            "why": self.why,
        }


@dataclass(frozen=True)
class GoldenJob:
    """One seeded job: what the platform is asked to run, and which rank's loss is kept."""

    algorithm: str
    assignments: list[dict[str, Any]]
    config: dict[str, Any]
    loss_rank: int
    loss_role: str
    tolerance: Tolerance
    lr_key: str = "lr"
    timeout_s: float = 240.0

    @property
    def path(self) -> Path:
        return FOLDER / f"{self.algorithm}.json"

    @property
    def command(self) -> str:
        return f"{REGENERATE} {self.algorithm}"

    def with_lr_scaled(self, factor: float) -> GoldenJob:
        """The same job with its learning rate multiplied by ``factor``."""
        config = {**self.config, self.lr_key: self.config[self.lr_key] * factor}
        return replace(self, config=config)


# ddp, split_nn, hier_sync and zo_pair repeat bit for bit (also in-process and on plain gloo);
# 1e-4 leaves room for rounding that differs on another CPU or torch build (a 1e-6 change of
# the learning rate moves these curves by at most 9e-6) and fails a 0.1 % change of it.
FLOAT_TOLERANCE = Tolerance(
    rtol=1e-4,
    atol=1e-6,
    why="bit-for-bit equal run to run; a learning rate changed by 1e-6 moves the curve by "
    "at most 9e-6 relative, one changed by 0.1% by at least 1.3e-3",
)

JOBS: dict[str, GoldenJob] = {
    job.algorithm: job
    for job in (
        GoldenJob(
            "ddp",
            [
                {"party": "alice", "role": "trainer"},
                {"party": "bob", "role": "trainer"},
            ],
            {
                "model": {"kind": "mlp", "hidden": [16]},
                "dataset": "sklearn:wine",
                "steps": 24,
                "batch_size": 16,
                "lr": 0.05,
                "seed": 3,
                "eval_interval": 0,
                "log_interval": 1,
            },
            loss_rank=0,
            loss_role="trainer",
            tolerance=FLOAT_TOLERANCE,
        ),
        GoldenJob(
            "split_nn",
            [
                {"party": "alice", "role": "feature"},
                {"party": "bob", "role": "label"},
            ],
            {
                "dataset": "sklearn:wine",
                "steps": 24,
                "batch_size": 16,
                "lr": 0.1,
                "seed": 3,
                "bottom": {"hidden": [16], "out": 8},
                "middle": {"hidden": [], "out": 8},
                "eval_every": 0,
                "report_every": 1,
            },
            loss_rank=1,
            loss_role="label",
            tolerance=FLOAT_TOLERANCE,
        ),
        GoldenJob(
            "hier_sync",
            [
                {"party": "alice", "role": "node", "processes": 2},
                {"party": "bob", "role": "node", "processes": 2},
            ],
            {
                "model": {"kind": "mlp", "hidden": [16]},
                "dataset": "sklearn:wine",
                "steps": 20,
                "batch_size": 8,
                "lr": 0.05,
                "seed": 3,
                "bucket_bytes": 1024,
                "log_interval": 1,
            },
            loss_rank=0,
            loss_role="node",
            tolerance=FLOAT_TOLERANCE,
        ),
        GoldenJob(
            "zo_pair",
            [
                {"party": "alice", "role": "processor"},
                {"party": "bob", "role": "processor"},
            ],
            {
                "model": {"kind": "mlp", "hidden": [8]},
                "dataset": "sklearn:wine",
                "steps": 200,
                "micro_batch": 8,
                "lr": 0.01,
                "epsilon": 1e-3,
                "seed": 3,
                "eval_every": 0,
                "log_every": 10,
            },
            loss_rank=0,
            loss_role="processor",
            tolerance=FLOAT_TOLERANCE,
        ),
        GoldenJob(
            "mpc_mixed",
            [
                {"party": "alice", "role": "compute"},
                {"party": "bob", "role": "compute"},
                {"party": "carol", "role": "dealer"},
                {"party": "alice", "role": "features"},
                {"party": "bob", "role": "labels"},
            ],
            {
                "hidden": [8],
                "batch_size": 32,
                "epochs": 1,
                "max_steps": 20,
                "learning_rate": 0.5,
                "seed": 3,
                "log_every": 1,
            },
            loss_rank=4,
            loss_role="labels",
            tolerance=Tolerance(
                rtol=2e-2,
                atol=1e-4,
                why="shares are drawn from os.urandom, so fixed-point rounding differs run to "
                "run: at most 0.98% apart over 2415 pairs of 70 runs; a learning rate 10% "
                "higher moves the curve by at least 4.5%",
            ),
            lr_key="learning_rate",
        ),
    )
}


def run_curve(job: GoldenJob) -> Curve:
    """Run ``job`` on a real local world, as the platform would, and return its loss curve."""
    outcomes = run_algorithm(
        job.algorithm, job.assignments, job.config, threads=1, timeout_s=job.timeout_s
    )
    reporter = outcomes[job.loss_rank]
    if reporter.role != job.loss_role:
        raise AssertionError(
            f"{job.algorithm}: rank {job.loss_rank} plays {reporter.role!r}, not {job.loss_role!r}"
        )
    return reporter.series("loss")


def problems(golden: Curve, fresh: Curve, tolerance: Tolerance) -> list[str]:
    """Every way ``fresh`` fails to match ``golden``; empty when it matches at every step."""
    if not golden:
        return ["the golden curve is empty"]
    if not fresh:
        return ["the run reported no loss"]
    golden_steps, fresh_steps = [s for s, _ in golden], [s for s, _ in fresh]
    if golden_steps != fresh_steps:
        missing = sorted(set(golden_steps) - set(fresh_steps))
        extra = sorted(set(fresh_steps) - set(golden_steps))
        return [
            f"steps differ: golden {golden_steps}, fresh {fresh_steps} "
            f"(missing {missing}, extra {extra})"
        ]
    found = []
    for (step, want), (_, got) in zip(golden, fresh, strict=True):
        if not (math.isfinite(want) and math.isfinite(got)):
            found.append(f"step {step}: loss {got!r}, golden {want!r} (not finite)")
        elif abs(got - want) > tolerance.allowed(want):
            found.append(
                f"step {step}: loss {got!r}, golden {want!r}, off by {abs(got - want):.3g} "
                f"(allowed {tolerance.allowed(want):.3g})"
            )
    return found


def worst_ratio(golden: Curve, fresh: Curve, tolerance: Tolerance) -> float:
    """The largest ``|fresh - golden|`` over the allowed deviation, across the shared steps."""
    by_step = dict(fresh)
    ratios = [
        abs(by_step[step] - want) / tolerance.allowed(want)
        for step, want in golden
        if step in by_step
    ]
    return max(ratios, default=math.inf)


def document(job: GoldenJob, curve: Curve) -> dict[str, Any]:
    """The golden file's content for ``job`` and its freshly run ``curve``."""
    return {
        "algorithm": job.algorithm,
        "regenerate": job.command,
        "assignments": job.assignments,
        "config": job.config,
        "reported_by": {"rank": job.loss_rank, "role": job.loss_role, "metric": "loss"},
        "tolerance": job.tolerance.as_json(),
        "curve": [[step, loss] for step, loss in curve],
    }


def render(doc: dict[str, Any]) -> str:
    """JSON text of a golden file, one ``[step, loss]`` point per line."""
    head = json.dumps({k: v for k, v in doc.items() if k != "curve"}, indent=2)
    points = ",\n".join(f"    {json.dumps(point)}" for point in doc["curve"])
    return f'{head[:-2]},\n  "curve": [\n{points}\n  ]\n}}\n'


def load(job: GoldenJob) -> dict[str, Any]:
    """The stored golden file of ``job``."""
    doc: dict[str, Any] = json.loads(job.path.read_text())
    return doc


def stored_curve(doc: dict[str, Any]) -> Curve:
    return [(int(step), float(loss)) for step, loss in doc["curve"]]
