"""``tessera bench hier_sync``: two nodes of two devices against PyTorch's data-parallel methods
on the same four ranks.

Baselines, each in the same invocation and world as ``hier_sync``, with the same model, data,
optimizer, threads and link (``torch_baselines.py``): ``torch.nn.parallel
.DistributedDataParallel`` (``torch_ddp``) and FSDP2 hybrid sharding (``fsdp_hybrid``: replicate
across nodes x shard within, equal shards). The platform's own ``ddp`` (one blocking all-reduce
of a concatenated gradient) stays as an extra row.

Three parts:

- *agreement*: 50 SGD steps from the same initialisation and data, equal and 0.7/0.3 slices,
  and the largest parameter difference against ``torch_ddp`` (and ``ddp``);
- *speed and traffic*: a model of over 10M parameters, each method in a world of fresh
  processes on the same testbed; every method timed the same way (from
  after the one-element all-reduce opening each step to the updated parameters; per step the
  slowest rank, then the median), state bytes per device counted the same way (distinct
  storages of gradients and optimizer state), peak resident memory per rank and, with
  ``--netns``, the bytes that crossed the rate-limited inter-node link per step (interface
  counters; ranks 0, 1 on host 0 and 2, 3 on host 1);
- *proportional slicing* (``proportional.py``): device 1 of each node gets half the CPU of
  device 0 (CFS bandwidth limits per rank where the machine allows them, else the harness paces
  each thread to the same shares of a core) and reports half the capacity;
  ``memory_and_compute`` slices against ``equal`` slices.

``--set parts=proportional`` (any of ``agreement,speed,proportional``) runs only the parts
named; the compression sweep and convergence run with ``speed``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.bench.hier_sync.blocks import benchmark_gradient, block_sweep
from tessera_ml.bench.hier_sync.compression import MODES, convergence_jobs, convergence_results
from tessera_ml.bench.hier_sync.cpu_limit import PERIOD_US, cpu_limit_kind, quota_us
from tessera_ml.bench.hier_sync.jobs import PARTY, Outcomes, ddp_params, hier_params, slowest, world
from tessera_ml.bench.hier_sync.proportional import SLOW_MODES, proportional
from tessera_ml.bench.hier_sync.torch_baselines import TorchJob
from tessera_ml.bench.measure import link_bytes_per_step
from tessera_ml.netns import Testbed
from tessera_ml.worlds import RankOutcome, WorldJob

PLACEMENT = [0, 0, 1, 1]
# two nodes of two devices of one party: what a platform job of that party runs, gloo between
# the nodes (nodes of different parties talk over TLS links instead)
NODE_OPTIONS: dict[str, Any] = {"devices_per_node": 2}
NODES: list[dict[str, Any]] = [
    {"party": PARTY, "role": "node", "processes": 4, "options": NODE_OPTIONS}
]
TRAINERS = [{"party": PARTY, "role": "trainer", "processes": 4}]
SETTABLE = (
    "steps",
    "batch_size",
    "rate_mbit",
    "hidden",
    "optimizer",
    "bucket_bytes",
    "slowdown",
    "slow_mode",
    "core_share",
    "cfs_period_us",
    "repeats",
    "inter_node_compression",
    "compression_block",
    "intra_node_transport",
    "proportional_devices",
    "converge_steps",
    "parts",
)
PARTS = ("agreement", "speed", "proportional")
HIER_SYNC_ONLY = ("bucket_bytes", "intra_node_transport")
"""Settings the platform's ``ddp`` does not take."""
AGREEMENT_STEPS = 50
BASELINES = ("torch_ddp", "fsdp_hybrid")


def agreement(root: Path) -> dict[str, float]:
    """Largest |parameter difference| after 50 fp32 steps, equal and 0.7/0.3 slices, against
    torch DDP (and the platform's ddp)."""
    config = {
        "steps": AGREEMENT_STEPS,
        "batch_size": 16,
        "model": {"kind": "mlp", "hidden": [64]},
        "optimizer": "sgd",
        "lr": 0.05,
    }
    saved = {**config, "checkpoint_interval": AGREEMENT_STEPS}
    # two buckets (the last layer, then the first), each cut 0.7/0.3
    uneven = {"slicing": "memory", "capacities": [0.7, 0.3], "bucket_bytes": 2048}
    jobs: list[WorldJob | TorchJob] = [
        TorchJob("torch_ddp", NODES, config, "torch_ddp", keep_params=True),
        TorchJob("fsdp_hybrid", NODES, config, "fsdp_hybrid", keep_params=True),
        WorldJob("ddp", TRAINERS, {**saved, "eval_interval": 0}, "ddp", str(root / "ddp")),
        WorldJob("hier_sync", NODES, saved, "equal", str(root / "equal")),
        WorldJob("hier_sync", NODES, {**saved, **uneven}, "uneven", str(root / "uneven")),
    ]
    outcomes = world(jobs)
    last = f"step-{AGREEMENT_STEPS:09d}"
    torch_ddp = [torch.from_numpy(o["torch_ddp"].result["params"]) for o in outcomes]
    fsdp = [torch.from_numpy(o["fsdp_hybrid"].result["params"]) for o in outcomes]
    ddp = ddp_params(root / "ddp" / last)
    reference = torch_ddp[0]
    diffs: dict[str, float] = {}
    for name in ("equal", "uneven"):
        per_node = [hier_params(root / name / last, node) for node in ([0, 1], [2, 3])]
        diffs[name] = _max_diff(per_node, reference)
        diffs[f"{name}_ddp"] = _max_diff(per_node, ddp)
    return {
        "max_abs_param_diff_vs_torch_ddp": max(diffs["equal"], diffs["uneven"]),
        "max_abs_param_diff_vs_torch_ddp_equal": diffs["equal"],
        "max_abs_param_diff_vs_torch_ddp_uneven": diffs["uneven"],
        "max_abs_param_diff_vs_ddp": max(diffs["equal_ddp"], diffs["uneven_ddp"]),
        "fsdp_hybrid_max_abs_param_diff_vs_torch_ddp": _max_diff(fsdp, reference),
        "torch_ddp_ranks_max_abs_param_diff": _max_diff(torch_ddp, reference),
    }


def _max_diff(params: Sequence[torch.Tensor], reference: torch.Tensor) -> float:
    return max(float((p - reference).abs().max()) for p in params)


def slowest_step_time(outcomes: Outcomes, job: str, warmup: int, ranks: Sequence[int]) -> float:
    """Per step after ``warmup``, the slowest of ``ranks``; the median over those steps."""
    return slowest(outcomes, [job], "step_time_s", warmup, ranks)


def _last(outcome: RankOutcome, name: str) -> float:
    return outcome.series(name)[-1][1]


def speed(
    config: dict[str, Any],
    testbed: Testbed | None,
    warmup: int,
    compression: str = "none",
    block: int = 256,
) -> dict[str, Any]:
    """Every method, one after the other on the same ranks and link: step time, memory,
    bytes. With ``compression``, the headline ``hier_sync`` row quantises its inter-node
    all-reduce and the full-precision run becomes the ``uncompressed_`` row (with int8, an
    ``int4_`` row as well)."""
    ddp_config = {k: v for k, v in config.items() if k not in HIER_SYNC_ONLY}
    ddp_config["eval_interval"] = 0
    jobs: list[WorldJob | TorchJob] = [
        TorchJob("torch_ddp", NODES, config, "torch_ddp"),
        TorchJob("fsdp_hybrid", NODES, config, "fsdp_hybrid"),
        WorldJob("hier_sync", NODES, config, "hier_sync"),
        WorldJob("ddp", TRAINERS, ddp_config, "ddp"),
    ]
    rows: list[tuple[str, str]] = [("hier_sync", "")]
    compared = [*BASELINES, "ddp"]
    if compression != "none":
        modes = [compression] + (["int4"] if compression == "int8" else [])
        for mode in modes:
            quantised = {**config, "inter_node_compression": mode, "compression_block": block}
            jobs.append(WorldJob("hier_sync", NODES, quantised, f"hier_sync_{mode}"))
        rows = [(f"hier_sync_{compression}", ""), ("hier_sync", "uncompressed_")]
        rows += [(f"hier_sync_{m}", f"{m}_") for m in modes[1:]]
        compared.append("uncompressed")
    main = rows[0][0]
    placed: dict[str, Any] = {"hosts": PLACEMENT, "testbed": testbed} if testbed else {}
    # a world of fresh processes per method, so each rank's peak memory is that method's own
    outcomes: Outcomes = [{} for _ in range(4)]
    for method in jobs:
        for per_rank, outcome in zip(outcomes, world([method], **placed), strict=True):
            per_rank.update(outcome)
    numel = int(outcomes[0]["hier_sync"].result["numel"])
    ranks = range(4)
    results: dict[str, Any] = {"parameters": numel, "gradient_bytes": numel * 4}
    rows += [*((b, f"{b}_") for b in BASELINES), ("ddp", "ddp_")]
    for job, prefix in rows:
        results[f"{prefix}step_time_s"] = slowest_step_time(outcomes, job, warmup, ranks)
        results[f"{prefix}state_bytes_per_device"] = [
            int(_last(o[job], "state_bytes")) for o in outcomes
        ]
        results[f"{prefix}peak_rss_bytes_per_rank"] = [
            int(o[job].result["peak_rss_bytes"]) for o in outcomes
        ]
        results[f"{prefix}start_rss_bytes_per_rank"] = [
            int(o[job].result["start_rss_bytes"]) for o in outcomes
        ]
        results[f"{prefix}loss"] = _last(outcomes[0][job], "loss")
        if testbed is not None:
            results[f"{prefix}inter_node_bytes_per_step"] = link_bytes_per_step(
                [o[job] for o in outcomes], PLACEMENT, warmup
            )
    results["optimizer_state_bytes_per_device"] = [
        int(_last(o[main], "optimizer_state_bytes")) for o in outcomes
    ]
    for baseline in compared:
        results[f"step_time_ratio_vs_{baseline}"] = (
            results["step_time_s"] / results[f"{baseline}_step_time_s"]
        )
        results[f"state_bytes_ratio_vs_{baseline}"] = max(results["state_bytes_per_device"]) / max(
            results[f"{baseline}_state_bytes_per_device"]
        )
        results[f"peak_rss_ratio_vs_{baseline}"] = max(results["peak_rss_bytes_per_rank"]) / max(
            results[f"{baseline}_peak_rss_bytes_per_rank"]
        )
        if testbed is not None:
            results[f"inter_node_bytes_ratio_vs_{baseline}"] = (
                results["inter_node_bytes_per_step"]
                / results[f"{baseline}_inter_node_bytes_per_step"]
            )
    if testbed is not None:
        bound = 2 * (2 - 1) * numel * 4
        results["inter_node_bytes_vs_bound"] = results["inter_node_bytes_per_step"] / bound
    return results


TAKES_MODEL = False
"""Its model is set with ``--set``, not ``--model``."""


def bench(args: BenchArgs) -> BenchReport:
    unknown = sorted(set(args.extra) - set(SETTABLE))
    if unknown:
        raise ValueError(f"hier_sync bench takes no --set {', '.join(unknown)} (known: {SETTABLE})")
    extra = args.extra
    parts = extra.get("parts", ",".join(PARTS)).split(",")
    if set(parts) - set(PARTS):
        raise ValueError(f"parts must name some of {', '.join(PARTS)}, not {extra['parts']!r}")
    hidden = extra.integers("hidden", "512,512" if args.quick else "2560,2560,2560")
    steps = extra.integer("steps", 6 if args.quick else 10)
    warmup = 2
    config: dict[str, Any] = {
        "model": {"kind": "mlp", "hidden": hidden},
        "dataset": "sklearn:digits",
        "steps": steps,
        "batch_size": extra.integer("batch_size", 16),
        "optimizer": extra.get("optimizer", "adam"),
        "lr": 0.001,
        "bucket_bytes": extra.integer("bucket_bytes", 4 << 20),
        "log_interval": 1,
    }
    if "intra_node_transport" in extra:  # else the job's own default
        config["intra_node_transport"] = extra["intra_node_transport"]
    limit = cpu_limit_kind()
    params: dict[str, Any] = {
        **config,
        "nodes": 2,
        "devices_per_node": 2,
        "placement": PLACEMENT,
        "warmup_steps": warmup,
        "netns": args.netns,
        "torch_version": torch.__version__,
        "cpu_limit_available": limit,
        "parts": parts,
    }
    compression = extra.get("inter_node_compression", "none")
    if compression not in MODES:
        raise ValueError(f"inter_node_compression must be one of {MODES}, not {compression!r}")
    block = extra.integer("compression_block", 256)
    params["inter_node_compression"] = compression
    params["compression_block"] = block
    repeats = extra.integer("repeats", 1 if args.quick else 3)
    params["proportional_repeats"] = repeats
    params["slowdown"] = extra.real("slowdown", 2)
    params["core_share"] = extra.real("core_share", 0.5)
    params["proportional_devices"] = extra.integer("proportional_devices", 2)
    params["cfs_period_us"] = extra.integer("cfs_period_us", PERIOD_US)
    if params["proportional_devices"] < 2:
        raise ValueError("proportional_devices must be at least 2 (devices per node)")
    params["slow_mode"] = extra.get("slow_mode", "cpu_limit" if limit else "pace")
    if params["slow_mode"] not in SLOW_MODES:
        raise ValueError(f"slow_mode must be one of {SLOW_MODES}, not {params['slow_mode']!r}")
    if "proportional" in parts:  # before any part runs
        for share in (params["core_share"], params["core_share"] / params["slowdown"]):
            if params["slow_mode"] == "cpu_limit":
                quota_us(share, params["cfs_period_us"])
            elif params["slow_mode"] == "pace" and not 0.0 < share <= 1.0:
                raise ValueError(f"slow_mode pace: a share of {share:g} core is not in (0, 1]")
    rate_mbit = extra.real("rate_mbit", 200.0)  # every value is read before any part runs
    converge_steps = extra.integer("converge_steps", 100 if args.quick else 600)
    results: dict[str, Any] = {}
    if "agreement" in parts:
        with tempfile.TemporaryDirectory(prefix="hier-sync-bench-") as root:
            results.update(agreement(Path(root)))
    if "speed" in parts and args.netns:
        params["rate_mbit"] = rate_mbit
        with Testbed(2, rate_mbit=params["rate_mbit"]) as testbed:
            results.update(speed(config, testbed, warmup, compression, block))
    elif "speed" in parts:
        results.update(speed(config, None, warmup, compression, block))
    if "speed" in parts and compression != "none":
        gradient = benchmark_gradient([64, *hidden], 10, config["batch_size"], seed=0)
        results["compression_block_sweep"] = block_sweep(gradient)
        converge = {
            "model": {"kind": "mlp", "hidden": [512, 512]},
            "dataset": "sklearn:digits",
            "steps": converge_steps,
            "batch_size": 16,
            "optimizer": "adam",
            "lr": 0.001,
            "log_interval": 50,
        }
        params["convergence"] = converge
        outcomes = world(convergence_jobs(NODES, converge, block))
        results.update(convergence_results(outcomes[0]))
    if "proportional" in parts:
        results.update(
            proportional(
                config,
                params["slowdown"],
                params["slow_mode"],
                warmup,
                repeats,
                params["core_share"],
                params["proportional_devices"],
                params["cfs_period_us"],
            )
        )
        results["slice_vs_capacity_fraction"] = [
            s / c
            for s, c in zip(results["slice_fractions"], results["capacity_fractions"], strict=True)
        ]
    params["cpus"] = os.cpu_count()
    return BenchReport(params=params, results=results)
