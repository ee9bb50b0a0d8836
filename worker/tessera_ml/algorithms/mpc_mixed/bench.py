"""Benchmark: the method (``mixed``) beside ``all64`` and ``all32`` and a plaintext float64 run
with the same initialisation and batches, all in one invocation.

Each secure mode runs as a platform job (five ranks: two compute parties, dealer, features,
labels) on a local gloo world. The modes run concurrently by default, so that all of them see
the same machine load; ``--set sequential=1`` runs them one after another. With ``--netns`` each
party is a simulated host behind a link shaped to ``--set rate_mbit=R`` (default 10 Mbit/s, a
link between organisations), one testbed per mode.
"""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Any

import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.model_cnn import PlainCnn
from tessera_ml.algorithms.mpc_mixed.precision import MODES
from tessera_ml.algorithms.mpc_mixed.reference import PlainMlp
from tessera_ml.algorithms.mpc_mixed.spec import MpcMixedConfig
from tessera_ml.algorithms.mpc_mixed.train import initial_params
from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.netns import Testbed
from tessera_ml.testing import RankOutcome, run_algorithm

ASSIGNMENTS = [
    {"party": "alice", "role": "compute"},
    {"party": "bob", "role": "compute"},
    {"party": "dealer-co", "role": "dealer"},
    {"party": "alice", "role": "features"},
    {"party": "bob", "role": "labels"},
]


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
        "batch_size": int(extra.get("batch_size", 64)),
        "learning_rate": float(extra.get("learning_rate", default_lr)),
        "hidden": [int(h) for h in extra.get("hidden", "64").split(",")],
        "dataset": extra.get("dataset", "digits"),
        "seed": int(extra.get("seed", 0)),
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


def _summarise(outcomes: list[RankOutcome]) -> dict[str, float]:
    compute = next(o for o in outcomes if o.role == "compute" and o.rank == 0)
    fetching = next(o for o in outcomes if o.role == "compute" and o.rank == 1)
    labels = next(o for o in outcomes if o.role == "labels")
    out = {
        "test_accuracy": float(labels.result["test_accuracy"]),
        "online_bytes_per_step": float(compute.result["online_bytes"]),
        "offline_bytes_per_step": float(fetching.result["offline_bytes"]),
        "rounds_per_step": float(compute.result["online_rounds"]),
        "step_time_s": max(
            float(compute.result["step_time_s"]), float(fetching.result["step_time_s"])
        ),
        "step_cpu_s": max(
            float(compute.result["step_cpu_s"]), float(fetching.result["step_cpu_s"])
        ),
        "offline_time_s": float(fetching.result["offline_time_s"]),
        "steps": float(compute.result["steps"]),
    }
    if "link_online_bytes" in compute.result:
        out["link_online_bytes_per_step"] = float(compute.result["link_online_bytes"])
    return out


def bench(args: BenchArgs) -> BenchReport:
    configs = {mode: _config(args, mode) for mode in MODES}
    sequential = args.extra.get("sequential", "0") == "1"
    summaries: dict[str, dict[str, float]] = {}
    errors: list[BaseException] = []

    rate = float(args.extra.get("rate_mbit", 10.0))

    testbeds: dict[str, Testbed] = {}

    def one(mode: str) -> None:
        try:
            outcomes = run_algorithm(
                "mpc_mixed",
                ASSIGNMENTS,
                configs[mode],
                timeout_s=3600,
                hosts="party" if mode in testbeds else None,
                testbed=testbeds.get(mode),
            )
            summaries[mode] = _summarise(outcomes)
        except BaseException as exc:
            errors.append(exc)

    with ExitStack() as stack:
        if args.netns:
            # one simulated host per party, and a testbed per mode so modes never share a link
            parties = len({a["party"] for a in ASSIGNMENTS})
            for mode in MODES:
                testbeds[mode] = stack.enter_context(Testbed(parties, rate_mbit=rate))
        if sequential:
            for mode in MODES:
                one(mode)
        else:
            threads = [threading.Thread(target=one, args=(m,)) for m in MODES]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    if errors:
        raise errors[0]
    results: dict[str, Any] = {}
    for mode in MODES:
        prefix = "" if mode == "mixed" else f"{mode}_"
        for key, value in summaries[mode].items():
            results[prefix + key] = value
    results["plaintext_test_accuracy"] = plaintext_accuracy(configs["mixed"])
    results["accuracy_gap_points"] = 100 * (
        results["plaintext_test_accuracy"] - results["test_accuracy"]
    )
    results["online_bytes_ratio"] = (
        results["online_bytes_per_step"] / results["all64_online_bytes_per_step"]
    )
    results["step_time_ratio"] = results["step_time_s"] / results["all64_step_time_s"]
    results["step_cpu_ratio"] = results["step_cpu_s"] / results["all64_step_cpu_s"]
    params = {k: v for k, v in configs["mixed"].items() if k != "mode"}
    params["concurrent_modes"] = not sequential
    params["netns"] = args.netns
    if args.netns:
        params["rate_mbit"] = rate
        params["hosts"] = "one per party"
    return BenchReport(params=params, results=results)
