"""Time to accuracy over a slow link: ``zo_pair`` against back-propagation data parallelism.

Both start from the same back-propagation checkpoint (``ddp`` pretrained on digits 0-4, so the
model knows half the classes) and fine-tune on all ten digits, one process on each of the two
hosts of the testbed, the hosts joined by a rate-limited link: ``zo_pair`` (one pair, 2 x 16
examples per step) and ``ddp`` (2 ranks x 16 examples per step, SGD with momentum), both run
as platform jobs. Rank 0 of each evaluates the test split every few steps, outside its timed
step. The time to accuracy of a method is the sum of rank 0's step times up to its first
evaluation at or above the target: training time without the evaluations.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tessera_ml.algorithms.zo_pair.model import evaluate, load_weights, make_model
from tessera_ml.bench.api import Sets
from tessera_ml.data.resolver import resolve
from tessera_ml.netns import Testbed
from tessera_ml.worlds import RankOutcome, run_algorithm

HOSTS = [0, 1]
PROCESSES = 2
MICRO_BATCH = 16


RACE_SETTABLE = (
    "race_hidden",
    "race_rate_mbit",
    "race_target_accuracy",
    "race_pretrain_steps",
    "race_zo_lr",
    "race_zo_steps",
    "race_ddp_lr",
    "race_ddp_steps",
)


def race_params(quick: bool, extra: Sets) -> dict[str, Any]:
    return {
        "race_hidden": extra.integers("race_hidden", "1024" if quick else "4096"),
        "race_rate_mbit": extra.real("race_rate_mbit", 10.0),
        "race_target_accuracy": extra.real("race_target_accuracy", 0.8 if quick else 0.85),
        "race_pretrain_steps": extra.integer("race_pretrain_steps", 100),
        "race_zo_lr": extra.real("race_zo_lr", 3e-4),
        "race_zo_steps": extra.integer("race_zo_steps", 4000 if quick else 6000),
        "race_zo_eval_every": 50,
        "race_ddp_lr": extra.real("race_ddp_lr", 0.1),
        "race_ddp_steps": extra.integer("race_ddp_steps", 30 if quick else 40),
        "race_micro_batch": MICRO_BATCH,
        "race_processes": PROCESSES,
        "race_placement": HOSTS,
    }


def _pretrain(p: dict[str, Any], folder: Path, digits_0_4: str) -> Path:
    steps = p["race_pretrain_steps"]
    run_algorithm(
        "ddp",
        [{"party": "bench", "role": "trainer", "processes": PROCESSES}],
        {
            "model": {"kind": "mlp", "hidden": p["race_hidden"], "out_features": 10},
            "dataset": digits_0_4,
            "steps": steps,
            "batch_size": 2 * MICRO_BATCH,
            "lr": 0.05,
            "log_interval": steps,
            "eval_interval": 0,
            "checkpoint_interval": steps,
        },
        checkpoint_dir=str(folder / "pretrain"),
        timeout_s=1800,
    )
    return folder / "pretrain" / f"step-{steps:09d}"


def _start(
    p: dict[str, Any], pretrained: Path, folder: Path, dataset: str
) -> tuple[Path, dict[str, float]]:
    """The pretrained weights as step 0 of both fine-tuning jobs: ``rank-R.pt`` files holding
    the model and, for ``ddp`` to resume from, a fresh optimizer with the fine-tuning settings
    (``zo_pair`` reads the model of ``rank-0.pt``)."""
    data = resolve(dataset)
    model = make_model({"kind": "mlp", "hidden": p["race_hidden"]}, data, seed=0)
    load_weights(model, str(pretrained), torch.device("cpu"))
    start_eval = evaluate(model, data, torch.device("cpu"))
    start_eval["parameters"] = sum(t.numel() for t in model.parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=p["race_ddp_lr"], momentum=0.9)
    state = {"step": 0, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    start = folder / "start"
    start.mkdir()
    for rank in range(PROCESSES):
        torch.save(state, start / f"rank-{rank}.pt")
    return start, start_eval


def time_to_target(outcome: RankOutcome, target: float) -> dict[str, float | None]:
    """Training seconds (step times summed) until the first evaluation reaching ``target``,
    that evaluation's step and accuracy, the best accuracy of the run and the run's training
    seconds in all."""
    accuracies = outcome.series("accuracy")
    reached = next(((s, a) for s, a in accuracies if a >= target), None)
    best = max(a for _, a in accuracies)
    step, accuracy = reached if reached is not None else (None, None)
    times = outcome.series("step_time_s")
    return {
        "time_s": None if step is None else _training_s(times, step),
        "step": step,
        "accuracy": accuracy,
        "best_accuracy": best,
        "total_s": _training_s(times, None),
    }


def _training_s(times: list[tuple[int, float]], until: int | None) -> float:
    """Seconds of training up to step ``until`` (all of it with None), from the logged windows'
    mean step times."""
    elapsed, previous = 0.0, 0
    for step, mean_time in times:
        if until is not None and step > until:
            break
        elapsed += mean_time * (step - previous)
        previous = step
    return elapsed


def ratio_keys(ours: dict[str, float | None], theirs: dict[str, float | None]) -> dict[str, Any]:
    """``time_to_accuracy_ratio_vs_ddp`` (``zo_pair``'s time to the target over ``ddp``'s), None
    where a method did not reach the target, which ``time_to_accuracy_missed_by`` names. Where
    one of the two reached it, its time against the other's whole training bounds the ratio:
    ``zo_pair`` missing it took longer than all its training (``…_at_least``), ``ddp`` missing
    it longer than all of its own (``…_at_most``)."""
    missed = [name for name, m in (("zo_pair", ours), ("ddp", theirs)) if m["time_s"] is None]
    keys: dict[str, Any] = {
        "time_to_accuracy_missed_by": missed,
        "time_to_accuracy_ratio_vs_ddp": None,
    }
    zo_time, ddp_time = ours["time_s"], theirs["time_s"]
    zo_total, ddp_total = ours["total_s"], theirs["total_s"]
    if zo_time is not None and ddp_time is not None:
        keys["time_to_accuracy_ratio_vs_ddp"] = zo_time / ddp_time
    elif ddp_time is not None and zo_total is not None:
        keys["time_to_accuracy_ratio_vs_ddp_at_least"] = zo_total / ddp_time
    elif zo_time is not None and ddp_total is not None and ddp_total > 0:
        keys["time_to_accuracy_ratio_vs_ddp_at_most"] = zo_time / ddp_total
    return keys


def _ddp(p: dict[str, Any], start: Path, dataset: str, testbed: Testbed) -> list[RankOutcome]:
    return run_algorithm(
        "ddp",
        [{"party": "bench", "role": "trainer", "processes": PROCESSES}],
        {
            "model": {"kind": "mlp", "hidden": p["race_hidden"]},
            "dataset": dataset,
            "steps": p["race_ddp_steps"],
            "batch_size": MICRO_BATCH,
            "optimizer": "sgd",
            "momentum": 0.9,
            "lr": p["race_ddp_lr"],
            "log_interval": 1,
            "eval_interval": 1,
        },
        resume_from=str(start),
        testbed=testbed,
        hosts=HOSTS,
        timeout_s=3600,
    )


def _zo(p: dict[str, Any], start: Path, dataset: str, testbed: Testbed) -> list[RankOutcome]:
    every = p["race_zo_eval_every"]
    return run_algorithm(
        "zo_pair",
        [{"party": "bench", "role": "processor", "processes": PROCESSES}],
        {
            "model": {"kind": "mlp", "hidden": p["race_hidden"]},
            "dataset": dataset,
            "init_checkpoint": str(start),
            "steps": p["race_zo_steps"],
            "micro_batch": MICRO_BATCH,
            "lr": p["race_zo_lr"],
            "lr_schedule": "constant",
            "epsilon": 1e-3,
            "perturbation": "rademacher",
            "eval_every": every,
            "log_every": every,
        },
        testbed=testbed,
        hosts=HOSTS,
        timeout_s=3600,
    )


def race(p: dict[str, Any], dataset: str, digits_0_4: Callable[[Path], str]) -> dict[str, Any]:
    """Pretrain, then fine-tune with both methods on the testbed; the time-to-accuracy keys."""
    target = p["race_target_accuracy"]
    with tempfile.TemporaryDirectory(prefix="zo_pair-race-") as tmp:
        folder = Path(tmp)
        pretrained = _pretrain(p, folder, digits_0_4(folder))
        start, start_eval = _start(p, pretrained, folder, dataset)
        with Testbed(2, rate_mbit=p["race_rate_mbit"]) as testbed:
            ddp, ddp_wall, ddp_bytes = _timed(testbed, lambda: _ddp(p, start, dataset, testbed))
            zo, zo_wall, zo_bytes = _timed(testbed, lambda: _zo(p, start, dataset, testbed))
    ours, theirs = time_to_target(zo[0], target), time_to_target(ddp[0], target)
    results: dict[str, Any] = {
        "target_accuracy": target,
        "zo_accuracy": ours["accuracy"],
        "ddp_accuracy": theirs["accuracy"],
        "zo_time_to_accuracy_s": ours["time_s"],
        "ddp_time_to_accuracy_s": theirs["time_s"],
        "zo_steps_to_accuracy": ours["step"],
        "ddp_steps_to_accuracy": theirs["step"],
        "zo_best_accuracy": ours["best_accuracy"],
        "ddp_best_accuracy": theirs["best_accuracy"],
        "race_start_accuracy": start_eval["accuracy"],
        "race_parameters": start_eval["parameters"],
        "race_zo_step_time_s": _median_step(zo[0]),
        "race_ddp_step_time_s": _median_step(ddp[0]),
        "race_zo_job_wall_s": zo_wall,
        "race_ddp_job_wall_s": ddp_wall,
        "race_zo_link_bytes": zo_bytes,
        "race_ddp_link_bytes": ddp_bytes,
        **ratio_keys(ours, theirs),
    }
    return results


def _timed(
    testbed: Testbed, job: Callable[[], list[RankOutcome]]
) -> tuple[list[RankOutcome], float, int]:
    """A job's outcomes, its wall time and the bytes that crossed the links (whole job, start
    and evaluations included), from the interface counters."""
    before = testbed.inter_host_bytes()
    began = time.perf_counter()
    outcomes = job()
    return outcomes, time.perf_counter() - began, testbed.inter_host_bytes() - before


def _median_step(outcome: RankOutcome) -> float:
    """Median over the logged windows of the mean step time."""
    return statistics.median(v for _, v in outcome.series("step_time_s"))
