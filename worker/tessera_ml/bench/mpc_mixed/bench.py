"""Benchmark: the method (``mixed``) against the strongest single-ring baseline (``all64``), and
``all32`` and a plaintext float64 run with the same initialisation and batches, all in one
invocation; and the cost of TLS between the parties: ``mixed`` again with every rank in one
plaintext gloo world (``gloo``).

Each mode runs in the configurations a user would pick from (``JOBS``), and its best, the lowest
median whole step (waiting for the step's material, then the online phase) among its jobs that
trained to within a point of plaintext accuracy, is its headline:
each of ``mixed`` and ``all64`` with the ``tree`` or the ``fan_in`` comparison, and in its
Z_2^64 ring with masked truncation (``mixed``'s default) or local truncation (each party shifts
its own share, as two-party 64-bit systems do); ``mixed_truncation`` and ``all64_truncation``
name the ones that won. ``mixed``'s best with its default, masked truncation is compared with
the same ``all64`` too (``masked_mixed_*``). ``--set comparison=tree`` (or ``fan_in``) runs
that comparison only.

Each job is a platform job (five ranks: two compute parties, dealer, features, labels) wired as
the platform wires it: each party's ranks on gloo, TLS 1.3 between parties, the compute
parties' direct link included. The ``gloo`` job is the ``mixed`` (``tree``) job on one gloo
world, its direct link plain TCP: the baseline of ``tls_step_time_ratio``.
``--set schedule=`` chooses how the jobs share the machine:

- ``turns`` (default): the jobs start side by side and take turns step by step (see
  ``tessera_ml.bench.turns``, lent to the ranks by the benchmark's harness): one job's step,
  from its start to the end of its online phase, holds the machine while the others wait
  (only a dealer making its next bundle, and party 1 receiving one it asked for ahead, go on
  in the background), so a slow or fast moment of the machine reaches every job alike; step
  times are taken while all of them were running;
- ``interleaved``: the jobs take turns ``block_epochs`` (default 2) at a time, each resuming
  from its own checkpoint in new processes;
- ``sequential``: each job's whole run, one after another;
- ``side_by_side``: all jobs at once; step times are then taken over the span in which all of
  them were running.

With ``--netns`` each party is a simulated host behind a link shaped to ``--set rate_mbit=R``
(default 10 Mbit/s, a link between organisations), one testbed per job; the link of compute
party 0's host in the ``mixed_tree`` job is captured, and what its ranks sent to other parties
in clear (the communicator's tap) is looked for in it (``plaintext_matches_on_link``: 0 under
TLS).
"""

from __future__ import annotations

import tempfile
import threading
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.compute_party import initial_params
from tessera_ml.algorithms.mpc_mixed.model_cnn import PlainCnn
from tessera_ml.algorithms.mpc_mixed.spec import MpcMixedConfig
from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.bench.harness import BenchHarness
from tessera_ml.bench.measure import plaintext_matches
from tessera_ml.bench.mpc_mixed.reference import PlainMlp
from tessera_ml.bench.mpc_mixed.steps import (
    MIN_TIMED_STEPS,
    compute_ranks,
    overlap_window,
    steps_of,
    summarise,
)
from tessera_ml.bench.mpc_mixed.wraps import wrap_risk
from tessera_ml.netcapture import LinkCapture
from tessera_ml.netns import Testbed
from tessera_ml.worlds import RankOutcome, run_algorithm

ASSIGNMENTS = [
    {"party": "alice", "role": "compute"},
    {"party": "bob", "role": "compute"},
    {"party": "dealer-co", "role": "dealer"},
    {"party": "alice", "role": "features"},
    {"party": "bob", "role": "labels"},
]


@dataclass(frozen=True)
class Job:
    """One job of the benchmark: its configuration, and how its ranks are wired
    (``run_algorithm``'s ``transport``): the platform's mesh, TLS between parties; or one
    plaintext gloo world."""

    mode: str
    comparison: str
    truncation: str = "masked"
    transport: Literal["mesh", "gloo"] = "mesh"


JOBS: dict[str, Job] = {
    "mixed_tree": Job("mixed", "tree"),
    "mixed_fan_in": Job("mixed", "fan_in"),
    "mixed_local_tree": Job("mixed", "tree", "local"),
    "mixed_local_fan_in": Job("mixed", "fan_in", "local"),
    "all64_local_tree": Job("all64", "tree", "local"),
    "all64_local_fan_in": Job("all64", "fan_in", "local"),
    "all64_masked_tree": Job("all64", "tree"),
    "all32": Job("all32", "tree"),
    "gloo": Job("mixed", "tree", transport="gloo"),
}
CANDIDATES = {
    "mixed": ("mixed_tree", "mixed_fan_in", "mixed_local_tree", "mixed_local_fan_in"),
    "all64": ("all64_local_tree", "all64_local_fan_in", "all64_masked_tree"),
}
"""The jobs each compared mode picks its best from."""
ACCURACY_POINTS = 1.0
"""The accuracy target: a mode within this many points of plaintext. A job further below is
passed over when its mode picks its best job."""
CAPTURED_JOB = "mixed_tree"
CAPTURED_HOST = 0
"""The host of compute party 0 (alice, with the features) in that job's testbed."""
HEADLINE = (
    "whole_step_time_s",
    "online_step_time_s",
    "online_step_time_p10_s",
    "online_step_time_p90_s",
    "step_cpu_s",
    "offline_time_s",
    "test_accuracy",
    "online_bytes_per_step",
    "rounds_per_step",
    "offline_bytes_per_step",
    "timed_steps",
    "steps",
)
"""The keys each compared mode's best job gives its headline (``all64_`` for ``all64``)."""


def jobs_of(args: BenchArgs) -> dict[str, Job]:
    """The jobs to run: every one, or those of one comparison (``--set comparison=``)."""
    only = args.extra.get("comparison")
    if only is None:
        return dict(JOBS)
    if only not in ("tree", "fan_in"):
        raise ValueError(f"mpc_mixed bench: comparison must be tree or fan_in, not {only!r}")
    return {name: job for name, job in JOBS.items() if job.comparison == only}


def _config(args: BenchArgs, job: Job) -> dict[str, Any]:
    extra = args.extra
    model = args.model or "mlp"
    if model not in ("mlp", "cnn"):
        raise ValueError(f"mpc_mixed bench has no model {model!r} (models: mlp, cnn)")
    default_lr = 0.05 if model == "cnn" else 0.5
    cfg: dict[str, Any] = {
        "mode": job.mode,
        "comparison": job.comparison,
        "truncation": job.truncation,
        "model": model,
        "channels": extra.integer("channels", 8),
        "epochs": extra.integer("epochs", 1 if args.quick else 8),
        "batch_size": extra.integer("batch_size", MpcMixedConfig().batch_size),
        "learning_rate": extra.real("learning_rate", default_lr),
        "hidden": extra.integers("hidden", "64"),
        "dataset": extra.get("dataset", "digits"),
        "seed": extra.integer("seed", 0),
        "link": extra.get("link", "direct"),
        "log_every": 1000,
        "eval_every_epochs": 1000,
    }
    return cfg


def plaintext_accuracy(cfg: dict[str, Any]) -> float:
    """Float64 training with the same initialisation, batches, softmax form and updates."""
    ref = data.dataset_ref(None, cfg["dataset"])
    x = data.features(ref)
    y, classes = data.labels(ref)
    params = initial_params(MpcMixedConfig.model_validate(cfg), x.train.shape[1], classes)
    model: PlainMlp | PlainCnn = (
        PlainCnn(params) if cfg["model"] == "cnn" else PlainMlp(params, batch_norm=True)
    )
    onehot = torch.nn.functional.one_hot(y.train, classes).to(torch.float64)
    for epoch in range(cfg["epochs"]):
        for idx in data.batches(x.train.shape[0], cfg["batch_size"], epoch, cfg["seed"]):
            model.train_step(x.train[idx], onehot[idx], cfg["learning_rate"])
    return float((model.forward(x.test).argmax(1) == y.test).double().mean())


def local_truncation_risk(
    mode: str, job: Job, cfg: dict[str, Any], steps: int
) -> dict[str, float | int]:
    """For a job that truncates locally: its expected wrong truncations (``wraps.py``) over
    its own steps, batches and moving weights; nothing for one that does not, or for a model
    ``wraps.py`` does not step (it steps the digits MLP with one hidden layer)."""
    steppable = (cfg["model"], cfg["dataset"], len(cfg["hidden"])) == ("mlp", "digits", 1)
    if job.truncation != "local" or not steppable:
        return {}
    risk = wrap_risk(
        mode,
        cfg["batch_size"],
        cfg["hidden"][0],
        job.comparison,
        steps=steps,
        seed=cfg["seed"],
        learning_rate=cfg["learning_rate"],
    )
    return {
        "local_truncation_expected_errors_per_step": risk.expected_per_step,
        "local_truncation_expected_errors_per_run": risk.expected_per_step * risk.steps,
        "local_truncation_expected_errors_largest_step": risk.largest_per_step,
        "local_truncation_largest_value_bits": risk.largest_bits,
    }


SCHEDULES = ("turns", "interleaved", "side_by_side", "sequential")


def _schedule(args: BenchArgs) -> str:
    schedule = args.extra.get(
        "schedule", "sequential" if args.extra.get("sequential") == "1" else "turns"
    )
    if schedule not in SCHEDULES:
        raise ValueError(
            f"mpc_mixed bench: schedule must be one of {', '.join(SCHEDULES)}, not {schedule!r}"
        )
    return schedule


SETTABLE = (
    *("batch_size", "block_epochs", "channels", "comparison", "dataset", "epochs", "hidden"),
    *("learning_rate", "link", "rate_mbit", "schedule", "seed", "sequential"),
)


def bench(args: BenchArgs) -> BenchReport:
    unknown = sorted(set(args.extra) - set(SETTABLE))
    if unknown:
        raise ValueError(
            f"mpc_mixed bench takes no --set {', '.join(unknown)} (known: {', '.join(SETTABLE)})"
        )
    jobs = jobs_of(args)
    configs = {name: _config(args, job) for name, job in jobs.items()}
    schedule = _schedule(args)
    block = args.extra.integer("block_epochs", 2)
    if block < 1:
        raise ValueError(f"mpc_mixed bench: block_epochs must be at least 1, not {block}")
    runs: dict[str, list[list[RankOutcome]]] = {name: [] for name in jobs}
    errors: list[BaseException] = []
    rate = args.extra.real("rate_mbit", 10.0)
    testbeds: dict[str, Testbed] = {}
    folders: dict[str, Path] = {}
    harness = BenchHarness()
    capture: LinkCapture | None = None
    captured = CAPTURED_JOB if CAPTURED_JOB in jobs else "mixed_fan_in"

    def one(name: str, config: dict[str, Any], resume_from: Path | None = None) -> None:
        try:
            outcomes = run_algorithm(
                "mpc_mixed",
                ASSIGNMENTS,
                config,
                timeout_s=3600,
                hosts="party" if name in testbeds else None,
                testbed=testbeds.get(name),
                checkpoint_dir=str(folders[name]) if folders else None,
                resume_from=str(resume_from) if resume_from else None,
                harness=harness,
                transport=jobs[name].transport,
                sample_sent=capture is not None and name == captured,
            )
            runs[name].append(outcomes)
        except BaseException as exc:
            errors.append(exc)

    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mpc-bench-")))
        if args.netns:
            # one simulated host per party, and a testbed per job so jobs never share a link
            parties = len({a["party"] for a in ASSIGNMENTS})
            for name in jobs:
                testbeds[name] = stack.enter_context(Testbed(parties, rate_mbit=rate))
            capture = testbeds[captured].capture(CAPTURED_HOST, root / "capture")
            stack.callback(capture.stop)
        if schedule == "turns":
            harness = BenchHarness(turns=str(root / "turn.lock"))
        if schedule in ("turns", "side_by_side"):
            threads = [threading.Thread(target=one, args=(n, configs[n])) for n in jobs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        elif schedule == "sequential":
            for name in jobs:
                one(name, configs[name])
        else:
            # block_epochs at a time, each job resuming from its own checkpoint: the jobs never
            # share the machine, and a change of its load over the run reaches all of them alike
            folders.update({name: root / name for name in jobs})
            epochs = next(iter(configs.values()))["epochs"]
            for end in range(min(block, epochs), epochs + block, block):
                for name in jobs:
                    if errors:
                        break
                    resume = _last_checkpoint(runs[name][-1]) if runs[name] else None
                    one(name, {**configs[name], "epochs": min(end, epochs)}, resume)
        if errors:
            raise errors[0]
        found: dict[str, int] = {}
        if capture is not None:
            capture.stop()
            found = plaintext_matches(capture, [o for run in runs[captured] for o in run])
    # Side by side (taking turns or not), the jobs meet alike only while all of them run: before
    # the last has started, the first steps run beside its start-up, and once the fastest has
    # finished, the others' steps get more of the machine. Times are taken inside that span.
    window = None
    if schedule in ("turns", "side_by_side"):
        window = overlap_window(
            [
                [s for o in party for s in steps_of(o)]
                for name in jobs
                for party in compute_ranks(runs[name])
            ]
        )
    summaries = {name: summarise(runs[name], window) for name in jobs}
    if window is not None and min(s["timed_steps"] for s in summaries.values()) < MIN_TIMED_STEPS:
        window = None
        summaries = {name: summarise(runs[name], None) for name in jobs}
    results: dict[str, Any] = {}
    for name in jobs:
        for key, value in summaries[name].items():
            results[f"{name}_{key}"] = value
        results[f"{name}_cross_party_tls"] = _cross_party_tls(runs[name])
    results.update(headline(results, jobs, plaintext_accuracy(configs[next(iter(jobs))])))
    for mode, prefix in (("mixed", ""), ("all64", "all64_")):
        name = results[f"{mode}_job"]
        risk = local_truncation_risk(
            mode, jobs[name], configs[name], int(results[f"{prefix}steps"])
        )
        results.update({f"{prefix}{key}": value for key, value in risk.items()})
    if "gloo" in jobs:
        # TLS: the mixed job against the same job in clear
        for ratio, key in (
            ("tls_step_time_ratio", "online_step_time_s"),
            ("tls_step_cpu_ratio", "step_cpu_s"),
            ("tls_step_time_ratio_p10", "online_step_time_p10_s"),
            ("tls_whole_step_time_ratio", "whole_step_time_s"),
        ):
            results[ratio] = results[f"mixed_tree_{key}"] / results[f"gloo_{key}"]
    results.update(found)
    params = {
        k: v
        for k, v in configs[next(iter(jobs))].items()
        if k not in ("mode", "comparison", "truncation")
    }
    params["jobs"] = {
        name: f"{j.mode}, {j.comparison}, {j.truncation} truncation, {j.transport}"
        for name, j in jobs.items()
    }
    params["choice"] = (
        "each of mixed and all64 takes the job of its own with the lowest median whole step "
        "(material wait + online phase) in this run, among those within "
        f"{ACCURACY_POINTS:g} point of plaintext accuracy (all of them if none is)"
    )
    params["schedule"] = schedule
    if schedule == "interleaved":
        params["block_epochs"] = block
    params["step_times"] = (
        "medians over all steady steps"
        if window is None
        else "medians over the steady steps run while every job was running"
    )
    params["tls_baseline"] = (
        "gloo: the mixed_tree job with every rank in one plaintext gloo world (direct link in "
        "clear), in the same schedule"
    )
    params["netns"] = args.netns
    if args.netns:
        params["rate_mbit"] = rate
        params["hosts"] = "one per party"
        params["capture"] = (
            f"host {CAPTURED_HOST} (compute party 0) of the {captured} job's testbed"
        )
    else:
        params["capture"] = "none: link captures need --netns"
    return BenchReport(params=params, results=results)


def headline(results: dict[str, Any], jobs: dict[str, Job], plaintext: float) -> dict[str, Any]:
    """Each compared mode's best job (lowest median whole step among its jobs that trained to
    within ``ACCURACY_POINTS`` of plaintext, or among all of them where none did) under the
    mode's own keys (``whole_step_time_s``, ``all64_whole_step_time_s``, ...), the mode's jobs
    further below plaintext (``mixed_jobs_off_accuracy``, ``all64_jobs_off_accuracy``), and
    the ratios between them."""
    out: dict[str, Any] = {}
    for mode, prefix in (("mixed", ""), ("all64", "all64_")):
        names = [n for n in CANDIDATES[mode] if n in jobs]
        out[f"{mode}_jobs_off_accuracy"] = [
            n for n in names if _gap_points(plaintext, results, n) > ACCURACY_POINTS
        ]
        best = _best(names, results, plaintext)
        out[f"{mode}_job"] = best
        out[f"{mode}_comparison"] = jobs[best].comparison
        out[f"{mode}_truncation"] = jobs[best].truncation
        for key in HEADLINE:
            out[prefix + key] = results[f"{best}_{key}"]
    out["plaintext_test_accuracy"] = plaintext
    out["accuracy_gap_points"] = _gap_points(plaintext, results, out["mixed_job"])
    out["all64_accuracy_gap_points"] = _gap_points(plaintext, results, out["all64_job"])
    for ratio, key in (
        ("whole_step_time_ratio", "whole_step_time_s"),
        ("online_step_time_ratio", "online_step_time_s"),
        ("step_cpu_ratio", "step_cpu_s"),
        ("online_bytes_ratio", "online_bytes_per_step"),
        ("offline_bytes_ratio", "offline_bytes_per_step"),
        ("rounds_ratio", "rounds_per_step"),
    ):
        out[ratio] = out[key] / out["all64_" + key]
    masked = [n for n in CANDIDATES["mixed"] if n in jobs and jobs[n].truncation == "masked"]
    if masked:
        # mixed as it runs by default (masked truncation) against the same all64
        best = out["masked_mixed_job"] = _best(masked, results, plaintext)
        for ratio, key in (
            ("masked_mixed_whole_step_time_ratio", "whole_step_time_s"),
            ("masked_mixed_online_bytes_ratio", "online_bytes_per_step"),
        ):
            out[ratio] = results[f"{best}_{key}"] / out["all64_" + key]
    if "all64_masked_tree" in jobs:
        # the single-ring baseline with masked truncation, mixed's default
        out["whole_step_time_ratio_vs_all64_masked"] = (
            out["whole_step_time_s"] / results["all64_masked_tree_whole_step_time_s"]
        )
        out["online_bytes_ratio_vs_all64_masked"] = (
            out["online_bytes_per_step"] / results["all64_masked_tree_online_bytes_per_step"]
        )
    return out


def _gap_points(plaintext: float, results: dict[str, Any], job: str) -> float:
    """How many points of test accuracy ``job`` ended below plaintext."""
    return 100 * (plaintext - results[f"{job}_test_accuracy"])


def _best(names: list[str], results: dict[str, Any], plaintext: float) -> str:
    """Of the jobs ``names``, the one with the lowest median whole step among those within
    ``ACCURACY_POINTS`` of plaintext (a job that met a wrong local truncation and diverged is
    no user's pick), or among all of them where none is."""
    trained = [n for n in names if _gap_points(plaintext, results, n) <= ACCURACY_POINTS]
    return min(trained or names, key=lambda n: results[f"{n}_whole_step_time_s"])


def _cross_party_tls(runs: list[list[RankOutcome]]) -> bool:
    """Whether both compute parties' rounds crossed in TLS in every run of a job."""
    return all(bool(o.result["cross_party_tls"]) for party in compute_ranks(runs) for o in party)


def _last_checkpoint(outcomes: list[RankOutcome]) -> Path:
    _, folder, _, _ = max(outcomes[0].checkpoints)
    return Path(folder)
