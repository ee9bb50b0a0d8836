"""Whole jobs with each table: the same two-server, two-worker job on the compiled table and on
the torch table, back to back (same data, config and steps), samples per second per worker."""

from __future__ import annotations

import tempfile
from typing import Any

from tessera_ml.worlds import run_algorithm


def _samples_per_s(params: dict[str, Any], table: str, steps: int, root: str) -> float:
    dataset = (
        f"generated:clicks?rows={params['rows']}&fields={params['fields']}"
        f"&ids={params['ids']}&zipf=1.1&test=0.05"
    )
    assignments: list[dict[str, Any]] = [
        {"party": "servers", "role": "server", "processes": 2},
        {"party": "clicks-a", "role": "worker", "dataset": dataset},
        {"party": "clicks-b", "role": "worker", "dataset": dataset},
    ]
    config = {
        "steps": steps,
        "batch_size": params["batch_size"],
        "dim": params["dim"],
        "sparse_optimizer": params["sparse_optimizer"],
        "mode": params["mode"],
        "table": table,
    }
    outcomes = run_algorithm(
        "param_server", assignments, config, checkpoint_dir=root, timeout_s=3600
    )
    workers = [o.result["samples_per_s"] for o in outcomes if o.role == "worker"]
    return sum(workers) / len(workers)


def samples_per_s_by_table(params: dict[str, Any], steps: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as root:
        compiled = _samples_per_s(params, "auto", steps, f"{root}/auto")
        fallback = _samples_per_s(params, "torch", steps, f"{root}/torch")
    return {
        "e2e_steps": steps,
        "compiled_samples_per_s": compiled,
        "fallback_samples_per_s": fallback,
        "compiled_vs_fallback_samples": compiled / fallback,
    }
