"""``tessera bench split_nn``: split learning beside its baselines, in one invocation.

Three parties (one per simulated host with ``--netns``), wired as the platform wires a job (TLS
between parties, ``MeshCommunicator``), run in one world, one after another:

- float64 jobs (1 feature + 1 middle + 1 label; 2 feature parties with ``concat`` + 1 label)
  compared with one process training the composed network (``centralized.py``);
- the pipelined schedule beside the same micro-batches run one after another without overlap
  (and beside the whole-batch step) on rate-limited links whose token bucket holds only a few
  frames, so that a message crosses at the link's rate and not in one burst;
- uncompressed, fp16 and int8 cuts on the same data, seed and steps.

Then the cost of TLS: the pipelined job's configuration again (``tls_steps`` steps), in fresh
worlds alternately wired as the platform does (``transport="mesh"``) and as one plaintext gloo
world (``transport="gloo"``), in pairs ordered mesh-gloo, gloo-mesh, … on the same testbed.
With ``--netns`` the first pair runs while the middle party's host link (which every cut
crosses) is captured: windows of the plaintext the ranks sent under TLS are looked for in what
crossed that link (none must be there), and in the capture of the plaintext gloo run as well
(where they must be: the search can find them).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch

from tessera_ml.algorithms.split_nn.spec import SplitNNConfig
from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.bench.measure import plaintext_matches
from tessera_ml.bench.split_nn import microbatch
from tessera_ml.bench.split_nn.centralized import max_abs_diff, train_centralized
from tessera_ml.bench.split_nn.jobs import Job, run_jobs
from tessera_ml.netns import Testbed
from tessera_ml.worlds import RankOutcome, hosts_by_party, plan_job, run_algorithm, run_world

if TYPE_CHECKING:
    from tessera_ml.netcapture import LinkCapture

CODECS = ("none", "fp16", "int8")
SETTABLE = (
    "steps",
    "pipeline_steps",
    "rate_mbit",
    "width",
    "micro_batches",
    "batch_size",
    "tls_steps",
    "tls_pairs",
    "burst_bytes",
)
DIGITS = "sklearn:digits"
DIGITS_FEATURES = 64
DIGITS_CLASSES = 10
FRAME_BYTES = 1514
"""An Ethernet frame at the testbed's MTU of 1500 bytes."""
BURST_FRAMES = 4
"""The links' token bucket holds this many frames: a burst can outrun the rate by a few frames
only, not by a whole micro-batch (the testbed's default bucket of 64 KiB passes half of a
128 KiB message at once after an idle moment, which favours the schedule that idles)."""
TLS_JOB = "pipelined"
"""The job whose configuration is timed with TLS between parties and without."""
TLS_BASELINE: Literal["gloo"] = "gloo"
WARMUP = 2
"""Steps left out of every step time (first contact, allocation)."""
Transport = Literal["mesh", "gloo"]


def chain(columns: str = f"0:{DIGITS_FEATURES}") -> list[dict[str, Any]]:
    return [
        {"party": "alice", "role": "feature", "dataset": f"{DIGITS}?columns={columns}"},
        {"party": "bob", "role": "middle"},
        {"party": "carol", "role": "label", "dataset": DIGITS},
    ]


def two_features() -> list[dict[str, Any]]:
    return [
        {"party": "alice", "role": "feature", "dataset": f"{DIGITS}?columns=0:32"},
        {"party": "bob", "role": "feature", "dataset": f"{DIGITS}?columns=32:64"},
        {"party": "carol", "role": "label", "dataset": DIGITS},
    ]


@dataclass(frozen=True)
class Plan:
    jobs: dict[str, Job]
    """The main world's jobs, by name, in order."""
    tls_job: Job
    """The job timed with TLS between parties and on plaintext gloo."""
    tls_pairs: list[tuple[Transport, Transport]]
    params: dict[str, Any]


def plan_jobs(args: BenchArgs) -> Plan:
    extra = args.extra
    unknown = sorted(set(extra) - set(SETTABLE))
    if unknown:
        raise ValueError(f"split_nn bench takes no --set {', '.join(unknown)} (known: {SETTABLE})")
    steps = extra.integer("steps", 100 if args.quick else 600)
    pipe_steps = extra.integer("pipeline_steps", 8 if args.quick else 20)
    width = extra.integer("width", 64)
    micro = extra.integer("micro_batches", 8)
    batch = extra.integer("batch_size", 1024)
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
    # on links the pipeline's own steps suffice; on loopback a step is ~10x shorter
    tls_steps = extra.integer("tls_steps", pipe_steps if args.netns else 5 * pipe_steps)
    tls_pairs = extra.integer("tls_pairs", 2 if args.quick else 3)
    if tls_pairs < 1 or tls_steps <= WARMUP:
        raise ValueError(f"tls_pairs must be at least 1 and tls_steps above {WARMUP}")
    tls_job = Job(chain(), {**jobs[TLS_JOB].config, "steps": tls_steps, "report_every": tls_steps})
    seeds = range(1 if args.quick else 3)
    for codec_name in CODECS:
        for seed in seeds:
            jobs[f"{codec_name}/{seed}"] = Job(
                two_features(), {**wide, "compression": codec_name, "seed": seed}
            )
    params: dict[str, Any] = {
        "dataset": DIGITS,
        "exact": {"topologies": ["feature+middle+label", "2 feature (concat)+label"], **exact},
        "pipeline": {**pipe, "micro_batches": micro, "topology": "feature+middle+label"},
        "compression": {**wide, "topology": "2 feature (concat)+label", "seeds": list(seeds)},
        "parties": "alice, bob, carol: one per rank, TLS between them (MeshCommunicator)",
        "tls": {
            "job": f"{TLS_JOB}, {tls_steps} steps",
            "baseline": TLS_BASELINE,
            "order": [t for pair in tls_order(tls_pairs) for t in pair],
            "warmup_steps": WARMUP,
        },
    }
    if args.netns:
        params.update(
            netns=True,
            rate_mbit=extra.real("rate_mbit", 50.0),
            burst_bytes=extra.integer("burst_bytes", BURST_FRAMES * FRAME_BYTES),
            hosts="one per party",
        )
    return Plan(jobs, tls_job, tls_order(tls_pairs), params)


def planned_parties(jobs: Sequence[Job]) -> list[str]:
    """The party of each rank, from the rank plans of ``jobs``, which must all agree: the world
    is wired once, as the platform wires a job of these parties (one per rank)."""
    layouts = {
        tuple(slot.party for slot in plan_job("split_nn", job.assignments, job.config)[2])
        for job in jobs
    }
    if len(layouts) != 1:
        raise ValueError(f"the jobs of one world must plan the same parties, not {layouts}")
    return list(layouts.pop())


def tls_order(pairs: int) -> list[tuple[Transport, Transport]]:
    """Mesh and gloo runs in pairs, alternately mesh first and gloo first."""
    return [("mesh", "gloo") if i % 2 == 0 else ("gloo", "mesh") for i in range(pairs)]


TAKES_MODEL = False
"""Its model is set with ``--set``, not ``--model``."""


def bench(args: BenchArgs) -> BenchReport:
    plan = plan_jobs(args)
    jobs, params = plan.jobs, plan.params
    names = list(jobs)
    parties = planned_parties([*jobs.values(), plan.tls_job])
    started = time.perf_counter()
    if args.netns:
        with Testbed(
            3, rate_mbit=params["rate_mbit"], burst_bytes=params["burst_bytes"]
        ) as testbed:
            per_rank = run_world(
                run_jobs,
                3,
                [jobs[n] for n in names],
                testbed=testbed,
                hosts=[0, 1, 2],
                parties=parties,
                timeout_s=1800,
            )
            wall = time.perf_counter() - started
            params["tls"]["captured_host"] = "the middle party's"
            tls = tls_cost(plan.tls_job, plan.tls_pairs, testbed)
    else:
        params["netns"] = False
        per_rank = run_world(run_jobs, 3, [jobs[n] for n in names], parties=parties, timeout_s=1800)
        wall = time.perf_counter() - started
        tls = tls_cost(plan.tls_job, plan.tls_pairs, None)
    runs = {n: [per_rank[r][i] for r in range(3)] for i, n in enumerate(names)}
    results: dict[str, Any] = {"wall_s": wall, "tls_wall_s": time.perf_counter() - started - wall}
    # every rank of every job reached every other over TLS; the TLS side of the step time
    # comparison is wired the same way (transport="mesh")
    results["cross_party_tls"] = all(o["cross_party_tls"] for ranks in runs.values() for o in ranks)
    results.update(tls)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny reference only loses time to a thread pool
    try:
        results.update(_exactness(jobs, runs))
    finally:
        torch.set_num_threads(threads)
    results.update(_bytes(runs["exact_chain"]))
    results.update(_pipelining(runs))
    results.update(_microbatch_costs(params))
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


def _step_time(ranks: Sequence[dict[str, Any]], warmup: int = WARMUP) -> float:
    """The job's step time: the slowest rank's median step after ``warmup`` steps."""
    per_rank = [statistics.median(o["step_times"][warmup:] or o["step_times"]) for o in ranks]
    return float(max(per_rank))


def _steps_per_s(ranks: list[dict[str, Any]], warmup: int = WARMUP) -> float:
    return 1.0 / _step_time(ranks, warmup)


def tls_cost(
    job: Job, pairs: list[tuple[Transport, Transport]], testbed: Testbed | None
) -> dict[str, Any]:
    """``job``'s step time with TLS between parties over the same job on plaintext gloo.

    Every run is a fresh world of ``run_algorithm`` (one rank per party, one host per party on
    the testbed, one thread per rank), in ``pairs`` ordered so that drift reaches both
    transports. On a testbed both runs of the first pair are captured on the middle party's
    link (the capture costs both the same), and the TLS run keeps windows of its plaintext."""
    times: dict[Transport, list[float]] = {"mesh": [], "gloo": []}
    ratios = []
    found: dict[str, Any] = {}
    _, _, plan = plan_job("split_nn", job.assignments, job.config)
    watched = hosts_by_party(plan)[[slot.role for slot in plan].index("middle")]
    with tempfile.TemporaryDirectory(prefix="split-nn-tls-") as folder:
        for i, pair in enumerate(pairs):
            step: dict[Transport, float] = {}
            captures: dict[Transport, LinkCapture] = {}
            samples: list[RankOutcome] = []
            for transport in pair:
                if testbed is not None and i == 0:
                    captures[transport] = testbed.capture(watched, Path(folder) / transport)
                try:
                    sample_sent = transport == "mesh" and transport in captures
                    outcomes = _run(job, transport, testbed, sample_sent=sample_sent)
                finally:
                    if transport in captures:
                        captures[transport].stop()
                if sample_sent:
                    samples = outcomes
                step[transport] = _step_time([o.result for o in outcomes])
                times[transport].append(step[transport])
            ratios.append(step["mesh"] / step["gloo"])
            if captures:
                found = _plaintext(captures["mesh"], captures["gloo"], samples)
    mesh, gloo = statistics.median(times["mesh"]), statistics.median(times["gloo"])
    return {
        "tls_baseline": TLS_BASELINE,
        "tls_step_time_s": mesh,
        f"{TLS_BASELINE}_step_time_s": gloo,
        "tls_step_time_ratio": mesh / gloo,
        "tls_step_time_ratio_per_pair": ratios,
        "tls_step_times_s": times["mesh"],
        f"{TLS_BASELINE}_step_times_s": times["gloo"],
        **found,
    }


def _run(
    job: Job, transport: Transport, testbed: Testbed | None, *, sample_sent: bool
) -> list[RankOutcome]:
    return run_algorithm(
        "split_nn",
        job.assignments,
        job.config,
        transport=transport,
        sample_sent=sample_sent,
        testbed=testbed,
        hosts="party" if testbed is not None else None,
        timeout_s=1800,
    )


def _plaintext(tls: LinkCapture, plain: LinkCapture, outcomes: list[RankOutcome]) -> dict[str, int]:
    """What the capture of the TLS run found of the plaintext its ranks sent (must be 0), and
    what the capture of the plaintext run of the same job found of the same windows: its
    activations and gradients are the same bytes (only the alignment's random salt differs),
    so there the search must find them."""
    out = plaintext_matches(tls, outcomes)
    control = plaintext_matches(plain, outcomes)
    out[f"{TLS_BASELINE}_plaintext_matches_on_link"] = control["plaintext_matches_on_link"]
    out[f"{TLS_BASELINE}_captured_tcp_bytes"] = control["captured_tcp_bytes"]
    return out


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


def _microbatch_costs(params: dict[str, Any]) -> dict[str, float]:
    pipe = params["pipeline"]
    rows = pipe["batch_size"] // pipe["micro_batches"]
    config = {k: v for k, v in pipe.items() if k != "topology"}
    compute = microbatch.compute_s(
        config, features=DIGITS_FEATURES, classes=DIGITS_CLASSES, rows=rows
    )
    out = {"microbatch_compute_s": compute}
    if params.get("netns"):
        transfer = microbatch.transfer_s(config, rows=rows, rate_mbit=params["rate_mbit"])
        out["microbatch_transfer_s"] = transfer
        out["microbatch_transfer_over_compute"] = transfer / compute
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
