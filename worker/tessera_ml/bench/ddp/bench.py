"""``tessera bench ddp``: data parallel on N ranks beside one process with the same global batch.

``run_ddp`` is also the baseline other algorithms' benchmarks call.
"""

from __future__ import annotations

import time
from typing import Any

from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.bench.measure import (
    even_hosts,
    link_bytes_per_step,
    median_step_time,
    per_step_delta,
)
from tessera_ml.netns import Testbed
from tessera_ml.worlds import RankOutcome, run_algorithm

MODELS: dict[str, tuple[dict[str, Any], str]] = {
    "mlp": ({"kind": "mlp", "hidden": [256, 256]}, "sklearn:digits"),
    "cnn": ({"kind": "cnn", "channels": [16, 32]}, "sklearn:digits"),
    "click": ({"kind": "click", "dim": 8, "hidden": [64, 32]}, "generated:clicks?rows=50000"),
}
SETTABLE = ("steps", "batch_size", "ranks", "hosts", "rate_mbit", "lr", "dataset", "optimizer")


def bench_job(config: dict[str, Any], ranks: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The assignments and configuration of the ``ddp`` job the benchmark runs: one party with
    ``ranks`` processes, metrics every step, no evaluation before the end."""
    assignments = [{"party": "bench", "role": "trainer", "processes": ranks}]
    return assignments, {**config, "log_interval": 1, "eval_interval": 0}


def ddp_outcomes(
    config: dict[str, Any],
    ranks: int,
    *,
    testbed: Testbed | None = None,
    hosts: list[int] | None = None,
    in_process: bool = False,
) -> list[RankOutcome]:
    """Run the benchmark's ``ddp`` job (``bench_job``) as the platform would."""
    assignments, job_config = bench_job(config, ranks)
    return run_algorithm(
        "ddp", assignments, job_config, testbed=testbed, hosts=hosts, in_process=in_process
    )


def run_ddp(
    config: dict[str, Any],
    ranks: int,
    *,
    testbed: Testbed | None = None,
    hosts: list[int] | None = None,
    warmup: int = 5,
    in_process: bool = False,
) -> dict[str, float]:
    """Train ``ddp`` on ``ranks`` ranks (one party) and measure it.

    Returns ``accuracy`` / ``auc`` / ``eval_loss`` (whichever apply), ``step_time_s`` (median
    after ``warmup`` steps), ``bytes_sent_per_step`` (communicator accounting, rank 0),
    ``wall_s``, and with a testbed ``inter_node_bytes_per_step`` from the interface counters.
    """
    started = time.perf_counter()
    outcomes = ddp_outcomes(config, ranks, testbed=testbed, hosts=hosts, in_process=in_process)
    wall = time.perf_counter() - started
    first = outcomes[0]
    results = {
        k: float(first.result[k]) for k in ("accuracy", "auc", "eval_loss") if k in first.result
    }
    results["step_time_s"] = median_step_time(first, warmup)
    results["bytes_sent_per_step"] = per_step_delta(first, "bytes_sent", warmup)
    results["wall_s"] = wall
    if testbed is not None:
        placement = hosts if hosts is not None else list(range(ranks))
        results["inter_node_bytes_per_step"] = link_bytes_per_step(outcomes, placement, warmup)
    return results


def bench(args: BenchArgs) -> BenchReport:
    unknown = sorted(set(args.extra) - set(SETTABLE))
    if unknown:
        raise ValueError(f"ddp bench takes no --set {', '.join(unknown)} (known: {SETTABLE})")
    model_name = args.model or "mlp"
    if model_name not in MODELS:
        raise ValueError(f"--model must be one of {', '.join(MODELS)}, got {model_name!r}")
    model, dataset = MODELS[model_name]
    if args.quick and model_name == "mlp":
        model = {"kind": "mlp", "hidden": [64]}
    extra = args.extra
    ranks = extra.integer("ranks", 2 if args.quick else 4)
    steps = extra.integer("steps", 60 if args.quick else 300)
    batch = extra.integer("batch_size", 32)
    params: dict[str, Any] = {
        "model": model,
        "dataset": extra.get("dataset", dataset),
        "ranks": ranks,
        "steps": steps,
        "batch_size_per_rank": batch,
        "lr": extra.real("lr", 0.05),
        "optimizer": extra.get("optimizer", "sgd"),
        "netns": args.netns,
    }
    config = {
        "model": model,
        "dataset": params["dataset"],
        "steps": steps,
        "batch_size": batch,
        "lr": params["lr"],
        "optimizer": params["optimizer"],
    }
    if args.netns:
        n_hosts = extra.integer("hosts", 2)
        params.update(hosts=n_hosts, rate_mbit=extra.real("rate_mbit", 100.0))
        placement = even_hosts(ranks, n_hosts)
        params["placement"] = placement
        with Testbed(n_hosts, rate_mbit=params["rate_mbit"]) as testbed:
            ddp = run_ddp(config, ranks, testbed=testbed, hosts=placement)
    else:
        ddp = run_ddp(config, ranks)
    single = run_ddp({**config, "batch_size": batch * ranks}, 1, in_process=True)
    results = dict(ddp)
    results.update({f"single_{k}": v for k, v in single.items() if k != "bytes_sent_per_step"})
    return BenchReport(params=params, results=results)
