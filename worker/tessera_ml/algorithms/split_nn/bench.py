"""``tessera bench split_nn``: split learning beside its baselines, in one invocation.

Three parties (one per simulated host with ``--netns``) run, in one world, one after another:

- float64 jobs (1 feature + 1 middle + 1 label; 2 feature parties with ``concat`` + 1 label)
  compared with one process training the composed network (``centralized.py``);
- the pipelined schedule beside the sequential one (whole batch, and the same micro-batches
  without overlap) on rate-limited links;
- uncompressed, fp16 and int8 cuts on the same data, seed and steps.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from tessera_ml.algorithms.split_nn.centralized import max_abs_diff, train_centralized
from tessera_ml.algorithms.split_nn.jobs import Job, run_jobs
from tessera_ml.algorithms.split_nn.spec import SplitNNConfig
from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.netns import Testbed
from tessera_ml.testing import run_world

CODECS = ("none", "fp16", "int8")
SETTABLE = ("steps", "pipeline_steps", "rate_mbit", "width", "micro_batches", "batch_size")
DIGITS = "sklearn:digits"


def chain(columns: str = "0:64") -> list[dict[str, Any]]:
    return [
        {"party": "alice", "role": "feature", "dataset": f"{DIGITS}?columns={columns}"},
        {"party": "mid", "role": "middle"},
        {"party": "carol", "role": "label", "dataset": DIGITS},
    ]


def two_features() -> list[dict[str, Any]]:
    return [
        {"party": "alice", "role": "feature", "dataset": f"{DIGITS}?columns=0:32"},
        {"party": "bob", "role": "feature", "dataset": f"{DIGITS}?columns=32:64"},
        {"party": "carol", "role": "label", "dataset": DIGITS},
    ]


def plan_jobs(args: BenchArgs) -> tuple[dict[str, Job], dict[str, Any]]:
    extra = args.extra
    unknown = sorted(set(extra) - set(SETTABLE))
    if unknown:
        raise ValueError(f"split_nn bench takes no --set {', '.join(unknown)} (known: {SETTABLE})")
    steps = int(extra.get("steps", 100 if args.quick else 600))
    pipe_steps = int(extra.get("pipeline_steps", 8 if args.quick else 20))
    width = int(extra.get("width", 64))
    micro = int(extra.get("micro_batches", 8))
    batch = int(extra.get("batch_size", 1024))
    small = {
        "bottom": {"hidden": [32], "out": 16},
        "middle": {"hidden": [32], "out": 16},
        "batch_size": 32,
        "eval_every": 0,
        "report_every": 50,
    }
    exact = {**small, "dtype": "float64", "steps": 200, "lr": 0.05, "momentum": 0.9}
    wide = {
        "bottom": {"hidden": [width], "out": width},
        "middle": {"hidden": [width], "out": width},
        "batch_size": 64,
        "steps": steps,
        "lr": 0.05,
        "momentum": 0.9,
        "eval_every": 0,
        "report_every": 50,
    }
    pipe = {
        "bottom": {"hidden": [256], "out": 256},
        "middle": {"hidden": [256], "out": 256},
        "batch_size": batch,
        "steps": pipe_steps,
        "eval_every": 0,
        "report_every": pipe_steps,
    }
    jobs = {
        "exact_chain": Job(chain(), exact),
        "exact_two_concat": Job(two_features(), exact),
        "sequential": Job(chain(), {**pipe, "micro_batches": 1}),
        "sequential_micro": Job(chain(), {**pipe, "micro_batches": micro, "pipelined": False}),
        "pipelined": Job(chain(), {**pipe, "micro_batches": micro, "pipelined": True}),
    }
    seeds = range(1 if args.quick else 3)
    for codec_name in CODECS:
        for seed in seeds:
            jobs[f"{codec_name}/{seed}"] = Job(
                two_features(), {**wide, "compression": codec_name, "seed": seed}
            )
    params = {
        "dataset": DIGITS,
        "exact": {"topologies": ["feature+middle+label", "2 feature (concat)+label"], **exact},
        "pipeline": {**pipe, "micro_batches": micro, "topology": "feature+middle+label"},
        "compression": {**wide, "topology": "2 feature (concat)+label", "seeds": list(seeds)},
    }
    return jobs, params


def bench(args: BenchArgs) -> BenchReport:
    jobs, params = plan_jobs(args)
    names = list(jobs)
    started = time.perf_counter()
    if args.netns:
        rate = float(args.extra.get("rate_mbit", 50.0))
        params.update(netns=True, rate_mbit=rate, hosts="one per party")
        with Testbed(3, rate_mbit=rate) as testbed:
            per_rank = run_world(
                run_jobs,
                3,
                [jobs[n] for n in names],
                testbed=testbed,
                hosts=[0, 1, 2],
                timeout_s=1800,
            )
    else:
        params["netns"] = False
        per_rank = run_world(run_jobs, 3, [jobs[n] for n in names], timeout_s=1800)
    wall = time.perf_counter() - started
    runs = {n: [per_rank[r][i] for r in range(3)] for i, n in enumerate(names)}
    results: dict[str, Any] = {"wall_s": wall}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny reference only loses time to a thread pool
    try:
        results.update(_exactness(jobs, runs))
    finally:
        torch.set_num_threads(threads)
    results.update(_bytes(runs["exact_chain"]))
    results.update(_pipelining(runs))
    results.update(_compression(runs))
    return BenchReport(params=params, results=results)


def _exactness(jobs: dict[str, Job], runs: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    out = {}
    for name, key in (("exact_chain", "chain"), ("exact_two_concat", "two_features_concat")):
        job = jobs[name]
        ref = train_centralized(job.assignments, SplitNNConfig.model_validate(job.config))
        diffs = [max_abs_diff(o["parameters"], ref.parameters[r]) for r, o in enumerate(runs[name])]
        out[f"max_abs_param_diff_vs_centralized_{key}"] = max(diffs)
        out[f"centralized_accuracy_{key}"] = ref.eval["accuracy"]
        out[f"accuracy_{key}"] = runs[name][2]["eval"]["accuracy"]
    out["max_abs_param_diff_vs_centralized"] = max(
        out["max_abs_param_diff_vs_centralized_chain"],
        out["max_abs_param_diff_vs_centralized_two_features_concat"],
    )
    return out


def _per_step(ranks: list[dict[str, Any]], key: str) -> float:
    return float(sum(o[key] / max(1, o["train_steps"]) for o in ranks))


def _bytes(ranks: list[dict[str, Any]]) -> dict[str, float]:
    measured = _per_step(ranks, "train_bytes_sent")
    analytic = float(sum(o["analytic_bytes_sent_per_step"] for o in ranks))
    out = {
        "bytes_per_step": measured,
        "analytic_bytes_per_step": analytic,
        "bytes_ratio": measured / analytic,
    }
    link = _per_step(ranks, "train_link_bytes_sent")
    if link:
        out["link_bytes_per_step"] = link
    return out


def _steps_per_s(ranks: list[dict[str, Any]], warmup: int = 2) -> float:
    per_rank = [statistics.median(o["step_times"][warmup:] or o["step_times"]) for o in ranks]
    return 1.0 / max(per_rank)


def _pipelining(runs: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    seq, micro, pipe = runs["sequential"], runs["sequential_micro"], runs["pipelined"]
    out = {
        "sequential_steps_per_s": _steps_per_s(seq),
        "sequential_microbatched_steps_per_s": _steps_per_s(micro),
        "pipelined_steps_per_s": _steps_per_s(pipe),
        "pipelined_max_abs_param_diff_vs_sequential_microbatched": max(
            max_abs_diff(a["parameters"], b["parameters"]) for a, b in zip(micro, pipe, strict=True)
        ),
        "pipelined_max_abs_param_diff_vs_sequential": max(
            max_abs_diff(a["parameters"], b["parameters"]) for a, b in zip(seq, pipe, strict=True)
        ),
    }
    out["pipelined_vs_sequential_steps_per_s"] = (
        out["pipelined_steps_per_s"] / out["sequential_steps_per_s"]
    )
    out["pipelined_vs_sequential_microbatched_steps_per_s"] = (
        out["pipelined_steps_per_s"] / out["sequential_microbatched_steps_per_s"]
    )
    link = _per_step(pipe, "train_link_bytes_sent")
    if link:
        out["pipelined_link_bytes_per_step"] = link
    return out


def _compression(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Accuracy at the label party and bytes per step of each codec, averaged over the seeds;
    the drops compare each seed's run with the uncompressed run of the same seed."""
    seeds = sorted(int(name.split("/")[1]) for name in runs if name.startswith("none/"))

    def accuracy(codec_name: str, seed: int) -> float:
        return float(runs[f"{codec_name}/{seed}"][2]["eval"]["accuracy"])

    def per_step(codec_name: str) -> float:
        return statistics.mean(
            _per_step(runs[f"{codec_name}/{s}"], "train_bytes_sent") for s in seeds
        )

    out: dict[str, Any] = {
        "accuracy": statistics.mean(accuracy("none", s) for s in seeds),
        "uncompressed_bytes_per_step": per_step("none"),
    }
    for name in CODECS[1:]:
        drops = [accuracy("none", s) - accuracy(name, s) for s in seeds]
        out[f"{name}_accuracy"] = statistics.mean(accuracy(name, s) for s in seeds)
        out[f"{name}_accuracy_drop"] = statistics.mean(drops)
        out[f"{name}_accuracy_drop_per_seed"] = drops
        out[f"{name}_bytes_per_step"] = per_step(name)
        out[f"{name}_bytes_ratio"] = (
            out[f"{name}_bytes_per_step"] / out["uncompressed_bytes_per_step"]
        )
    return out
