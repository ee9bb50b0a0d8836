"""``tessera bench hier_sync``: two nodes of two devices against ``ddp`` on the same four ranks.

Three parts, each running ``ddp`` and ``hier_sync`` in the same invocation:

- *agreement*: 50 steps from the same initialisation and data, equal and 0.7/0.3 slices, and
  the largest parameter difference against ``ddp``;
- *speed and traffic*: a model of over 10M parameters, step times, state bytes per device and,
  with ``--netns``, the bytes that crossed the rate-limited inter-node link per step (read
  from the interface counters; ranks 0, 1 on host 0 and 2, 3 on host 1);
- *proportional slicing*: device 1 of each node is made ``slowdown`` times slower (paced, or
  given fewer threads) and reports proportionally less capacity; ``memory_and_compute``
  slices against ``equal`` slices.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.bench.hier_sync.jobs import ddp_params, hier_params, paced, run_named
from tessera_ml.netns import Testbed
from tessera_ml.worlds import RankOutcome, WorldJob, run_world

PLACEMENT = [0, 0, 1, 1]
PARTY = "cluster"
# two nodes of two devices of one party: what a platform job of that party runs, gloo between
# the nodes (nodes of different parties talk over TLS links instead)
NODE_OPTIONS: dict[str, Any] = {"devices_per_node": 2}
NODES: list[dict[str, Any]] = [
    {"party": PARTY, "role": "node", "processes": 4, "options": NODE_OPTIONS}
]
TRAINERS = [{"party": PARTY, "role": "trainer", "processes": 4}]
WIRING = [PARTY] * 4
SETTABLE = (
    "steps",
    "batch_size",
    "rate_mbit",
    "hidden",
    "optimizer",
    "bucket_bytes",
    "slowdown",
    "slow_mode",
    "repeats",
)
AGREEMENT_STEPS = 50


def _hidden(raw: str) -> list[int]:
    return [int(h) for h in raw.split(",") if h]


def agreement(root: Path) -> dict[str, float]:
    """Largest |parameter difference| against ddp after 50 steps, equal and 0.7/0.3 slices."""
    config = {
        "steps": AGREEMENT_STEPS,
        "batch_size": 16,
        "model": {"kind": "mlp", "hidden": [64]},
        "optimizer": "sgd",
        "lr": 0.05,
        "checkpoint_interval": AGREEMENT_STEPS,
    }
    uneven = {"slicing": "memory", "capacities": [0.7, 0.3], "bucket_bytes": 8192}
    jobs = [
        WorldJob("ddp", TRAINERS, {**config, "eval_interval": 0}, "ddp", str(root / "ddp")),
        WorldJob("hier_sync", NODES, config, "equal", str(root / "equal")),
        WorldJob("hier_sync", NODES, {**config, **uneven}, "uneven", str(root / "uneven")),
    ]
    run_world(run_named, 4, jobs, parties=WIRING)
    last = f"step-{AGREEMENT_STEPS:09d}"
    reference = ddp_params(root / "ddp" / last)
    diffs = {}
    for name in ("equal", "uneven"):
        per_node = [hier_params(root / name / last, node) for node in ([0, 1], [2, 3])]
        diffs[name] = max(float((p - reference).abs().max()) for p in per_node)
    return {
        "max_abs_param_diff_vs_ddp": max(diffs.values()),
        "max_abs_param_diff_vs_ddp_equal": diffs["equal"],
        "max_abs_param_diff_vs_ddp_uneven": diffs["uneven"],
    }


Outcomes = list[dict[str, RankOutcome]]


def _step_time(outcomes: Outcomes, job: str, warmup: int) -> float:
    """Median step time after ``warmup`` steps, of the slowest rank."""
    medians = []
    for per_rank in outcomes:
        times = [v for s, v in per_rank[job].series("step_time_s") if s > warmup]
        medians.append(statistics.median(times))
    return max(medians)


def _link_bytes_per_step(outcomes: Outcomes, job: str, warmup: int) -> float:
    """Bytes per step that left both hosts, from the counters read by one rank per host."""
    total = 0.0
    for reader in (PLACEMENT.index(h) for h in sorted(set(PLACEMENT))):
        series = [(s, v) for s, v in outcomes[reader][job].series("link_bytes_sent") if s >= warmup]
        (s0, v0), (s1, v1) = series[0], series[-1]
        total += (v1 - v0) / (s1 - s0)
    return total


def _last(outcome: RankOutcome, name: str) -> float:
    return outcome.series(name)[-1][1]


def speed(config: dict[str, Any], testbed: Testbed | None, warmup: int) -> dict[str, Any]:
    """ddp and hier_sync, one after the other on the same world: step time, bytes."""
    ddp_config = {k: v for k, v in config.items() if k != "bucket_bytes"} | {"eval_interval": 0}
    jobs = [
        WorldJob("ddp", TRAINERS, ddp_config, "ddp"),
        WorldJob("hier_sync", NODES, config, "hier"),
    ]
    hosts = PLACEMENT if testbed else None
    outcomes: Outcomes = run_world(run_named, 4, jobs, hosts=hosts, testbed=testbed, parties=WIRING)
    first = outcomes[0]
    numel = int(first["hier"].result["numel"])
    results: dict[str, Any] = {
        "parameters": numel,
        "gradient_bytes": numel * 4,
        "step_time_s": _step_time(outcomes, "hier", warmup),
        "ddp_step_time_s": _step_time(outcomes, "ddp", warmup),
        "equal_state_bytes_per_device": [int(o["hier"].result["state_bytes"]) for o in outcomes],
        "ddp_state_bytes_per_device": int(_last(first["ddp"], "state_bytes")),
        "loss": _last(first["hier"], "loss"),
        "ddp_loss": _last(first["ddp"], "loss"),
    }
    results["step_time_ratio"] = results["step_time_s"] / results["ddp_step_time_s"]
    if testbed is not None:
        ours = _link_bytes_per_step(outcomes, "hier", warmup)
        theirs = _link_bytes_per_step(outcomes, "ddp", warmup)
        results["inter_node_bytes_per_step"] = ours
        results["ddp_inter_node_bytes_per_step"] = theirs
        results["inter_node_bytes_vs_bound"] = ours / (2 * (2 - 1) * numel * 4)
        results["inter_node_bytes_vs_ddp"] = ours / theirs
    return results


def proportional(
    config: dict[str, Any], slowdown: float, mode: str, warmup: int, repeats: int
) -> dict[str, Any]:
    """Device 1 of each node is ``slowdown`` times slower and gets proportionally less capacity.

    ``mode`` ``pace`` slows it with the harness's pacing (``BenchHarness.speed``, every rank
    one thread);
    ``threads`` gives the fast devices ``slowdown`` times as many threads (needs a core per
    thread to mean anything). Equal and proportional runs alternate ``repeats`` times on one
    world, so a change of the machine's load during the measurement falls on both.
    """
    compute = [slowdown, 1.0] * 2
    if mode == "threads":
        threads = [int(slowdown), 1, int(slowdown), 1]
        harnesses = None
    else:
        threads = [1, 1, 1, 1]
        harnesses = paced((1.0, 1.0 / slowdown) * 2)
    nodes = [
        {**n, "capacity": compute, "options": {**NODE_OPTIONS, "compute": compute}} for n in NODES
    ]
    sized_config = {**config, "slicing": "memory_and_compute"}
    jobs = []
    for i in range(repeats):
        jobs += [
            WorldJob("hier_sync", nodes, config, f"equal-{i}", harnesses=harnesses),
            WorldJob("hier_sync", nodes, sized_config, f"sized-{i}", harnesses=harnesses),
        ]
    outcomes: Outcomes = run_world(run_named, 4, jobs, threads=threads, parties=WIRING)
    equal_time = _pooled_step_time(outcomes, "equal", warmup)
    sized_time = _pooled_step_time(outcomes, "sized", warmup)
    sized = [o["sized-0"].result for o in outcomes]
    return {
        "equal_slices_step_time_s": equal_time,
        "proportional_slices_step_time_s": sized_time,
        "proportional_vs_equal_step_time_ratio": sized_time / equal_time,
        "capacity_fractions": [r["capacity_fractions"][r["device_number"]] for r in sized],
        "slice_fractions": [r["slice_fractions"][r["device_number"]] for r in sized],
        "state_bytes_per_device": [int(r["state_bytes"]) for r in sized],
        "threads_per_device": threads,
        "pace_per_device": [1.0, 1.0 / slowdown] * 2 if mode == "pace" else [1.0] * 4,
    }


def _pooled_step_time(outcomes: Outcomes, prefix: str, warmup: int) -> float:
    """Median step time after warmup of every job named ``prefix-*``, of the slowest rank."""
    medians = []
    for per_rank in outcomes:
        times = [
            v
            for name, outcome in per_rank.items()
            if name.startswith(f"{prefix}-")
            for s, v in outcome.series("step_time_s")
            if s > warmup
        ]
        medians.append(statistics.median(times))
    return max(medians)


def bench(args: BenchArgs) -> BenchReport:
    unknown = sorted(set(args.extra) - set(SETTABLE))
    if unknown:
        raise ValueError(f"hier_sync bench takes no --set {', '.join(unknown)} (known: {SETTABLE})")
    extra = args.extra
    hidden = _hidden(extra.get("hidden", "512,512" if args.quick else "2560,2560,2560"))
    steps = int(extra.get("steps", 6 if args.quick else 10))
    warmup = 2
    config: dict[str, Any] = {
        "model": {"kind": "mlp", "hidden": hidden},
        "dataset": "sklearn:digits",
        "steps": steps,
        "batch_size": int(extra.get("batch_size", 16)),
        "optimizer": extra.get("optimizer", "adam"),
        "lr": 0.001,
        "bucket_bytes": int(extra.get("bucket_bytes", 4 << 20)),
        "log_interval": 1,
    }
    params: dict[str, Any] = {
        **config,
        "nodes": 2,
        "devices_per_node": 2,
        "placement": PLACEMENT,
        "warmup_steps": warmup,
        "netns": args.netns,
    }
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="hier-sync-bench-") as root:
        results.update(agreement(Path(root)))
    if args.netns:
        params["rate_mbit"] = float(extra.get("rate_mbit", 200.0))
        with Testbed(2, rate_mbit=params["rate_mbit"]) as testbed:
            results.update(speed(config, testbed, warmup))
    else:
        results.update(speed(config, None, warmup))
    repeats = int(extra.get("repeats", 1 if args.quick else 3))
    params["proportional_repeats"] = repeats
    params["slowdown"] = float(extra.get("slowdown", 2))
    params["slow_mode"] = extra.get("slow_mode", "pace")
    if params["slow_mode"] not in ("pace", "threads"):
        raise ValueError(f"slow_mode must be pace or threads, not {params['slow_mode']!r}")
    results.update(proportional(config, params["slowdown"], params["slow_mode"], warmup, repeats))
    results["slice_vs_capacity_fraction"] = [
        s / c
        for s, c in zip(results["slice_fractions"], results["capacity_fractions"], strict=True)
    ]
    results["state_bytes_vs_slice_of_ddp"] = [
        b / (f * results["ddp_state_bytes_per_device"])
        for b, f in zip(results["state_bytes_per_device"], results["slice_fractions"], strict=True)
    ]
    params["cpus"] = os.cpu_count()
    return BenchReport(params=params, results=results)
