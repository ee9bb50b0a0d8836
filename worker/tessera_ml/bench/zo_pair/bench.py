"""``tessera bench zo_pair``: forward-only pair training beside its baselines, in one invocation.

1. ``ddp`` pretrains an MLP with back-propagation on digits 0-4 (four ranks, checkpoint at the
   end): its per-step bytes are the data-parallel baseline for the same model.
2. From that checkpoint, plain back-propagation fine-tunes on all ten digits for B steps
   (one process, the same examples per step), and a ``zo_pair`` job with four processors
   fine-tunes for 20·B steps: test accuracies, the copies' checksums, bytes and z generations.
3. On a two-rank world, ``zo_pair`` steps alternate with single-process MeZO steps (Gaussian
   and the same z) and data-parallel MeZO steps over the same inputs (step time), and one step
   of each method is profiled for peak tensor memory against a back-propagation step on an MLP
   whose activations dominate.
4. With ``--netns``: time to a target accuracy against ``ddp`` from the same pretrained start,
   the two processes on two hosts joined by a slow link (``race.py``).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from tessera_ml.algorithms.zo_pair.model import evaluate, load_weights, make_model
from tessera_ml.algorithms.zo_pair.protocol import INPUTS_PER_PROCESSOR
from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.bench.measure import per_step_delta
from tessera_ml.bench.zo_pair.race import RACE_SETTABLE, race, race_params
from tessera_ml.bench.zo_pair.speed import SpeedSpec, speed_world
from tessera_ml.data.resolver import resolve
from tessera_ml.data.tabular import Dataset
from tessera_ml.worlds import run_algorithm, run_world

SETTABLE = (
    "processors",
    "hidden",
    "micro_batch",
    "pretrain_steps",
    "backprop_steps",
    "zo_steps",
    "lr",
    "epsilon",
    "directions",
    "perturbation",
    "timed_steps",
    *RACE_SETTABLE,
)
DATASET = "sklearn:digits"


def _params(args: BenchArgs) -> dict[str, Any]:
    unknown = sorted(set(args.extra) - set(SETTABLE))
    if unknown:
        raise ValueError(f"zo_pair bench takes no --set {', '.join(unknown)} (known: {SETTABLE})")
    if args.model not in (None, "mlp"):
        raise ValueError(f"zo_pair bench runs an MLP (--model mlp), not {args.model!r}")
    extra = args.extra
    backprop_steps = extra.integer("backprop_steps", 60 if args.quick else 1000)
    return {
        "dataset": DATASET,
        "processors": extra.integer("processors", 4),
        "hidden": extra.integers("hidden", "16"),
        "micro_batch": extra.integer("micro_batch", 16),
        "pretrain_steps": extra.integer("pretrain_steps", 50 if args.quick else 100),
        "backprop_steps": backprop_steps,
        "zo_steps": extra.integer("zo_steps", 20 * backprop_steps),
        "lr": extra.real("lr", 0.01 if args.quick else 0.005),
        "epsilon": extra.real("epsilon", 1e-3),
        "directions": extra.get("directions", "per_pair"),
        "perturbation": extra.get("perturbation", "rademacher"),
        "timed_steps": extra.integer("timed_steps", 20 if args.quick else 60),
        "speed_model_hidden": [1024, 1024] if args.quick else [2048, 2048],
        "speed_micro_batch": 16,
        "memory_model_hidden": [256] * 8,
        "memory_micro_batch": 512 if args.quick else 2048,
        "netns": args.netns,
        **(race_params(args.quick, extra) if args.netns else {}),
    }


def _first_five_digits(folder: Path) -> str:
    """The train split of digits 0-4 as a file job: the pretraining task."""
    data = resolve(DATASET)
    train = data.train
    assert train.y is not None
    keep = train.y < 5
    path = folder / "digits-0-4.npz"
    np.savez(
        path,
        x=train.x[keep].numpy(),
        y=train.y[keep].numpy(),
        ids=train.ids[keep].numpy(),
    )
    return f"file:{path}?test=0.1&split_seed=1"


def _pretrain(p: dict[str, Any], folder: Path) -> tuple[Path, float]:
    """``ddp`` on digits 0-4: the checkpoint to fine-tune from, and ddp's bytes per step."""
    steps = p["pretrain_steps"]
    outcomes = run_algorithm(
        "ddp",
        [{"party": "bench", "role": "trainer", "processes": p["processors"]}],
        {
            "model": {"kind": "mlp", "hidden": p["hidden"], "out_features": 10},
            "dataset": _first_five_digits(folder),
            "steps": steps,
            "batch_size": p["micro_batch"],
            "lr": 0.05,
            "log_interval": 1,
            "eval_interval": 0,
            "checkpoint_interval": steps,
        },
        checkpoint_dir=str(folder / "ddp"),
    )
    return folder / "ddp" / f"step-{steps:09d}", per_step_delta(outcomes[0], "bytes_sent", 5)


def _backprop_finetune(p: dict[str, Any], checkpoint: Path, data: Dataset) -> dict[str, float]:
    """Plain SGD with back-propagation over the same number of examples per step as zo_pair."""
    torch.manual_seed(0)
    model = make_model({"kind": "mlp", "hidden": p["hidden"]}, data, seed=0)
    load_weights(model, str(checkpoint), torch.device("cpu"))
    start = evaluate(model, data, torch.device("cpu"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train = data.train
    assert train.y is not None
    gen = torch.Generator().manual_seed(0)
    batch = p["processors"] * p["micro_batch"]
    began = time.perf_counter()
    for _ in range(p["backprop_steps"]):
        rows = torch.randint(0, len(train), (batch,), generator=gen)
        loss = F.cross_entropy(model(train.x[rows]), train.y[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    wall = time.perf_counter() - began
    result = evaluate(model, data, torch.device("cpu"))
    return {
        "pretrained_test_accuracy": start["accuracy"],
        "backprop_test_accuracy": result["accuracy"],
        "backprop_wall_s": wall,
    }


def _zo_finetune(p: dict[str, Any], checkpoint: Path) -> dict[str, Any]:
    steps = p["zo_steps"]
    log_every = max(1, steps // 20)
    began = time.perf_counter()
    outcomes = run_algorithm(
        "zo_pair",
        [{"party": "bench", "role": "processor", "processes": p["processors"]}],
        {
            "model": {"kind": "mlp", "hidden": p["hidden"]},
            "dataset": DATASET,
            "init_checkpoint": str(checkpoint),
            "steps": steps,
            "micro_batch": p["micro_batch"],
            "lr": p["lr"],
            "lr_schedule": "cosine",
            "epsilon": p["epsilon"],
            "directions": p["directions"],
            "perturbation": p["perturbation"],
            "eval_every": 0,
            "log_every": log_every,
        },
        timeout_s=3600,
    )
    wall = time.perf_counter() - began
    first = outcomes[0]
    sent = [per_step_delta(o, "bytes_sent", log_every) for o in outcomes]
    generations = [v for o in outcomes for _, v in o.series("z_generations")]
    times = [v for _, v in first.series("step_time_s")]
    return {
        "zo_test_accuracy": first.result["accuracy"],
        "param_checksums_equal": len({o.result["checksum"] for o in outcomes}) == 1,
        "checksum_steps": min(o.result["steps"] for o in outcomes),
        "bytes_sent_per_step_per_processor": max(sent),
        "inputs_per_processor": INPUTS_PER_PROCESSOR,
        "zo_generations_per_step_in_job": max(generations),
        "zo_job_step_time_s": statistics.median(times),
        "zo_wall_s": wall,
    }


def _speed(p: dict[str, Any]) -> dict[str, Any]:
    spec = SpeedSpec(
        in_features=64,
        time_hidden=p["speed_model_hidden"],
        time_micro_batch=p["speed_micro_batch"],
        memory_hidden=p["memory_model_hidden"],
        memory_micro_batch=p["memory_micro_batch"],
        timed_steps=p["timed_steps"],
        perturbation=p["perturbation"],
    )
    ranks = run_world(speed_world, 2, spec, timeout_s=1800)
    result = dict(ranks[0])
    result["step_time_s"] = max(r["step_time_s"] for r in ranks)
    result["step_cpu_time_s"] = max(r["step_cpu_time_s"] for r in ranks)
    result["z_generations_per_step"] = max(r["z_generations_per_step"] for r in ranks)
    for key in (
        "data_parallel_mezo_step_time_s",
        "data_parallel_mezo_cpu_time_s",
        "data_parallel_mezo_z_generations_per_step",
    ):
        result[key] = max(r[key] for r in ranks)
    result["waiting_rank_cpu_share"] = ranks[1]["waiting_rank_cpu_share"]
    if "waiting_rank_cpu_share_threaded" in ranks[1]:
        result["waiting_rank_cpu_share_threaded"] = ranks[1]["waiting_rank_cpu_share_threaded"]
    return result


def bench(args: BenchArgs) -> BenchReport:
    p = _params(args)
    with tempfile.TemporaryDirectory(prefix="zo_pair-bench-") as tmp:
        checkpoint, ddp_bytes = _pretrain(p, Path(tmp))
        results: dict[str, Any] = {"ddp_bytes_sent_per_step_per_processor": ddp_bytes}
        results.update(_backprop_finetune(p, checkpoint, resolve(DATASET)))
        results.update(_zo_finetune(p, checkpoint))
    results.update(_speed(p))
    results["bytes_limit_per_step_per_processor"] = 16 * INPUTS_PER_PROCESSOR
    results["memory_ratio"] = (
        results["peak_step_memory_bytes"] / results["backprop_peak_step_memory_bytes"]
    )
    results["step_time_ratio"] = results["step_time_s"] / results["mezo_single_process_step_time_s"]
    results["step_time_ratio_same_z"] = results["step_time_s"] / results["mezo_same_z_step_time_s"]
    results["step_time_ratio_vs_data_parallel_mezo"] = (
        results["step_time_s"] / results["data_parallel_mezo_step_time_s"]
    )
    if "mezo_single_process_cpu_time_s" in results:
        results["step_cpu_time_ratio"] = (
            results["step_cpu_time_s"] / results["mezo_single_process_cpu_time_s"]
        )
    results["accuracy_gap_points"] = 100 * (
        results["backprop_test_accuracy"] - results["zo_test_accuracy"]
    )
    results["zo_steps_over_backprop_steps"] = p["zo_steps"] / p["backprop_steps"]
    if args.netns:
        results.update(race(p, DATASET, _first_five_digits))
    return BenchReport(params=p, results=results)
