"""Benchmark: the method (``mixed``) beside ``all64`` and ``all32`` and a plaintext float64 run
with the same initialisation and batches, all in one invocation; and the cost of TLS between
the parties: ``mixed`` again with every rank in one plaintext gloo world (``gloo``).

Each secure mode runs as a platform job (five ranks: two compute parties, dealer, features,
labels) wired as the platform wires it: each party's ranks on gloo, TLS 1.3 between parties,
the compute parties' direct link included. The ``gloo`` job is the same ``mixed`` job on one
gloo world, its direct link plain TCP: the baseline of ``tls_step_time_ratio``. It runs in the
same schedule as the modes. ``--set schedule=`` chooses how the jobs share the machine:

- ``turns`` (default): the jobs start side by side and take turns step by step (see
  ``tessera_ml.bench.turns``): one job's step holds the machine while the others wait, so no
  online phase runs beside other work, and a slow or fast moment of the machine reaches every
  job alike; step times are taken while all of them were running;
- ``interleaved``: the jobs take turns ``block_epochs`` (default 2) at a time, each resuming
  from its own checkpoint in new processes;
- ``sequential``: each job's whole run, one after another;
- ``side_by_side``: all jobs at once (20 ranks); step times are then taken over the span in
  which all of them were running.

With ``--netns`` each party is a simulated host behind a link shaped to ``--set rate_mbit=R``
(default 10 Mbit/s, a link between organisations), one testbed per job; the link of compute
party 0's host in the ``mixed`` job is captured, and what its ranks sent to other parties in
clear (the communicator's tap) is looked for in it (``plaintext_matches_on_link``: 0 under TLS).
"""

from __future__ import annotations

import statistics
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
from tessera_ml.algorithms.mpc_mixed.reference import PlainMlp
from tessera_ml.algorithms.mpc_mixed.spec import MpcMixedConfig
from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.bench.harness import BenchHarness
from tessera_ml.bench.measure import plaintext_matches
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


JOBS: dict[str, tuple[str, Literal["mesh", "gloo"]]] = {
    "mixed": ("mixed", "mesh"),
    "all64": ("all64", "mesh"),
    "all32": ("all32", "mesh"),
    "gloo": ("mixed", "gloo"),
}
"""Each job of the benchmark: its mode, and how its ranks are wired (``run_algorithm``'s
``transport``): the platform's mesh, TLS between parties; or one plaintext gloo world."""
PREFIXES = {"mixed": "", "all64": "all64_", "all32": "all32_", "gloo": "gloo_"}
CAPTURED_HOST = 0
"""The host of compute party 0 (alice, with the features) in the ``mixed`` job's testbed."""


def _config(args: BenchArgs, mode: str) -> dict[str, Any]:
    extra = args.extra
    model = args.model or "mlp"
    if model not in ("mlp", "cnn"):
        raise ValueError(f"mpc_mixed bench has no model {model!r} (models: mlp, cnn)")
    default_lr = "0.05" if model == "cnn" else "0.5"
    cfg: dict[str, Any] = {
        "mode": mode,
        "model": model,
        "channels": int(extra.get("channels", 8)),
        "epochs": int(extra.get("epochs", 1 if args.quick else 8)),
        "batch_size": int(extra.get("batch_size", MpcMixedConfig().batch_size)),
        "learning_rate": float(extra.get("learning_rate", default_lr)),
        "hidden": [int(h) for h in extra.get("hidden", "64").split(",")],
        "dataset": extra.get("dataset", "digits"),
        "seed": int(extra.get("seed", 0)),
        "comparison": extra.get("comparison", "tree"),
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


MIN_TIMED_STEPS = 5
"""Fewer steps than this in the common span (modes that hardly overlapped): time whole runs."""


@dataclass(frozen=True)
class _Step:
    step: int
    start: float
    end: float
    wall_s: float
    cpu_s: float


def _steps(outcome: RankOutcome) -> list[_Step]:
    """A compute rank's steady-state steps with their wall-clock span: all but a run's first
    step, which records the dealer's schedule. A step's metrics are recorded right after its
    online phase, so the point's time is the step's end."""
    cpu = dict(outcome.series("step_cpu_s"))
    points = sorted((p for p in outcome.points if p.name == "step_time_s"), key=lambda p: p.step)
    return [_Step(p.step, p.time - p.value, p.time, p.value, cpu[p.step]) for p in points[1:]]


def _compute_ranks(runs: list[list[RankOutcome]]) -> list[list[RankOutcome]]:
    """Per compute party, its outcome in each run."""
    return [[o for run in runs for o in run if o.role == "compute" and o.rank == r] for r in (0, 1)]


def overlap_window(timelines: list[list[_Step]]) -> tuple[float, float]:
    """The span in which every job was in its steady state: from the last first step's start to
    the first last step's end (empty when the jobs did not overlap)."""
    start = max(min(s.start for s in t) for t in timelines)
    end = min(max(s.end for s in t) for t in timelines)
    return start, end


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))]


def _step_time(
    runs: list[list[RankOutcome]], window: tuple[float, float] | None, q: float = 0.5
) -> tuple[float, float, int]:
    """Wall and CPU time per step at quantile ``q`` (the median by default) of each compute
    party within ``window`` (all steady steps when None), the slower party's; and how many
    steps that is."""
    walls, cpus, counts = [], [], []
    for party in _compute_ranks(runs):
        steps = [
            s
            for outcome in party
            for s in _steps(outcome)
            if window is None or (s.start >= window[0] and s.end <= window[1])
        ]
        if not steps:
            return float("nan"), float("nan"), 0
        walls.append(_quantile([s.wall_s for s in steps], q))
        cpus.append(_quantile([s.cpu_s for s in steps], q))
        counts.append(len(steps))
    return max(walls), max(cpus), min(counts)


def _summarise(
    runs: list[list[RankOutcome]], window: tuple[float, float] | None
) -> dict[str, float]:
    """One mode's numbers over its runs (one, or one per epoch when interleaved)."""
    last = runs[-1]
    compute = next(o for o in last if o.role == "compute" and o.rank == 0)
    fetching = next(o for o in last if o.role == "compute" and o.rank == 1)
    labels = next(o for o in last if o.role == "labels")
    wall, cpu, steps = _step_time(runs, window)
    out = {
        "test_accuracy": float(labels.result["test_accuracy"]),
        "online_bytes_per_step": float(compute.result["online_bytes"]),
        "offline_bytes_per_step": float(fetching.result["offline_bytes"]),
        "rounds_per_step": float(compute.result["online_rounds"]),
        "step_time_s": wall,
        "step_time_p10_s": _step_time(runs, window, 0.1)[0],
        "step_time_p90_s": _step_time(runs, window, 0.9)[0],
        "step_cpu_s": cpu,
        "timed_steps": float(steps),
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
        out["step_time_whole_run_s"] = _step_time(runs, None)[0]
    if "link_online_bytes" in compute.result:
        out["link_online_bytes_per_step"] = float(compute.result["link_online_bytes"])
    return out


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


def bench(args: BenchArgs) -> BenchReport:
    configs = {job: _config(args, mode) for job, (mode, _) in JOBS.items()}
    schedule = _schedule(args)
    block = int(args.extra.get("block_epochs", 2))
    if block < 1:
        raise ValueError(f"mpc_mixed bench: block_epochs must be at least 1, not {block}")
    runs: dict[str, list[list[RankOutcome]]] = {job: [] for job in JOBS}
    errors: list[BaseException] = []
    rate = float(args.extra.get("rate_mbit", 10.0))
    testbeds: dict[str, Testbed] = {}
    folders: dict[str, Path] = {}
    harness = BenchHarness()
    capture: LinkCapture | None = None

    def one(job: str, config: dict[str, Any], resume_from: Path | None = None) -> None:
        try:
            outcomes = run_algorithm(
                "mpc_mixed",
                ASSIGNMENTS,
                config,
                timeout_s=3600,
                hosts="party" if job in testbeds else None,
                testbed=testbeds.get(job),
                checkpoint_dir=str(folders[job]) if folders else None,
                resume_from=str(resume_from) if resume_from else None,
                harness=harness,
                transport=JOBS[job][1],
                sample_sent=capture is not None and job == "mixed",
            )
            runs[job].append(outcomes)
        except BaseException as exc:
            errors.append(exc)

    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mpc-bench-")))
        if args.netns:
            # one simulated host per party, and a testbed per job so jobs never share a link
            parties = len({a["party"] for a in ASSIGNMENTS})
            for job in JOBS:
                testbeds[job] = stack.enter_context(Testbed(parties, rate_mbit=rate))
            capture = testbeds["mixed"].capture(CAPTURED_HOST, root / "capture")
            stack.callback(capture.stop)
        if schedule == "turns":
            harness = BenchHarness(turns=str(root / "turn.lock"))
        if schedule in ("turns", "side_by_side"):
            threads = [threading.Thread(target=one, args=(j, configs[j])) for j in JOBS]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        elif schedule == "sequential":
            for job in JOBS:
                one(job, configs[job])
        else:
            # block_epochs at a time, each job resuming from its own checkpoint: the jobs never
            # share the machine, and a change of its load over the run reaches all of them alike
            folders.update({job: root / job for job in JOBS})
            epochs = configs["mixed"]["epochs"]
            for end in range(min(block, epochs), epochs + block, block):
                for job in JOBS:
                    if errors:
                        break
                    resume = _last_checkpoint(runs[job][-1]) if runs[job] else None
                    one(job, {**configs[job], "epochs": min(end, epochs)}, resume)
        if errors:
            raise errors[0]
        found: dict[str, int] = {}
        if capture is not None:
            capture.stop()
            found = plaintext_matches(capture, [o for run in runs["mixed"] for o in run])
    # Side by side (taking turns or not), the jobs meet alike only while all of them run: before
    # the last has started, the first steps run beside its start-up, and once the fastest has
    # finished, the others' steps get more of the machine. Times are taken inside that span.
    window = None
    if schedule in ("turns", "side_by_side"):
        window = overlap_window(
            [
                [s for o in party for s in _steps(o)]
                for job in JOBS
                for party in _compute_ranks(runs[job])
            ]
        )
    summaries = {job: _summarise(runs[job], window) for job in JOBS}
    if window is not None and min(s["timed_steps"] for s in summaries.values()) < MIN_TIMED_STEPS:
        window = None
        summaries = {job: _summarise(runs[job], None) for job in JOBS}
    results: dict[str, Any] = {}
    for job in JOBS:
        for key, value in summaries[job].items():
            results[PREFIXES[job] + key] = value
        results[PREFIXES[job] + "cross_party_tls"] = _cross_party_tls(runs[job])
    results["plaintext_test_accuracy"] = plaintext_accuracy(configs["mixed"])
    results["accuracy_gap_points"] = 100 * (
        results["plaintext_test_accuracy"] - results["test_accuracy"]
    )
    results["online_bytes_ratio"] = (
        results["online_bytes_per_step"] / results["all64_online_bytes_per_step"]
    )
    for prefix, baseline in (("", "all64_"), ("tls_", "gloo_")):
        # the method against all64; the TLS job against the same job in clear
        for ratio, key in (
            ("step_time_ratio", "step_time_s"),
            ("step_cpu_ratio", "step_cpu_s"),
            ("step_time_ratio_p10", "step_time_p10_s"),
        ):
            results[prefix + ratio] = results[key] / results[baseline + key]
    if window is not None:
        results["step_time_ratio_whole_run"] = (
            results["step_time_whole_run_s"] / results["all64_step_time_whole_run_s"]
        )
        results["tls_step_time_ratio_whole_run"] = (
            results["step_time_whole_run_s"] / results["gloo_step_time_whole_run_s"]
        )
    results.update(found)
    params = {k: v for k, v in configs["mixed"].items() if k != "mode"}
    params["schedule"] = schedule
    if schedule == "interleaved":
        params["block_epochs"] = block
    params["step_times"] = (
        "medians over all steady steps"
        if window is None
        else "medians over the steady steps run while every job was running"
    )
    params["tls_baseline"] = (
        "gloo: the mixed job with every rank in one plaintext gloo world (direct link in clear), "
        "in the same schedule"
    )
    params["netns"] = args.netns
    if args.netns:
        params["rate_mbit"] = rate
        params["hosts"] = "one per party"
        params["capture"] = f"host {CAPTURED_HOST} (compute party 0) of the mixed job's testbed"
    else:
        params["capture"] = "none: link captures need --netns"
    return BenchReport(params=params, results=results)


def _cross_party_tls(runs: list[list[RankOutcome]]) -> bool:
    """Whether both compute parties' rounds crossed in TLS in every run of a job."""
    return all(bool(o.result["cross_party_tls"]) for party in _compute_ranks(runs) for o in party)


def _last_checkpoint(outcomes: list[RankOutcome]) -> Path:
    _, folder, _, _ = max(outcomes[0].checkpoints)
    return Path(folder)
