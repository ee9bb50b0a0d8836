"""``tessera bench param_server``: the table, the optimizers and whole jobs, each beside a baseline.

- *lookup*: lookup-or-insert of a growing table against a dict from id to row index over one
  growing tensor read with ``index_select`` (the strong baseline) and a Python dict of row
  tensors (the weak one), on the same batches (Zipf(1.1) ids over 2**34 ranks, so most ids of
  a batch are new), and the table's resident bytes per row against the row payload;
- *optimizers*: sparse Adagrad and Adam against torch's dense optimizers;
- *training*: two servers and two workers on the generated Zipf click log (``generated:clicks``),
  with deduplication and without it (same batches), and the test AUC against the AUC of the
  generating model on the same test rows.
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch

from tessera_ml.algorithms.param_server.reference import compare_with_dense
from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.bench.param_server.lookup_bench import run_lookup_bench
from tessera_ml.worlds import RankOutcome, run_algorithm

SETTABLE = (
    "steps",
    "batch_size",
    "rows",
    "ids",
    "fields",
    "lookup_rows",
    "lookup_batch",
    "plain_steps",
    "sparse_optimizer",
    "mode",
)
FULL = {
    "steps": 2000,
    "batch_size": 1024,
    "rows": 2_000_000,
    "ids": 1000,
    "fields": 8,
    "lookup_rows": 1_000_000,
    "lookup_batch": 262_144,
    "plain_steps": 50,
}
QUICK = {
    "steps": 100,
    "batch_size": 512,
    "rows": 200_000,
    "ids": 1000,
    "fields": 8,
    "lookup_rows": 200_000,
    "lookup_batch": 262_144,
    "plain_steps": 20,
}
DIM = 16


def _params(args: BenchArgs) -> dict[str, Any]:
    params: dict[str, Any] = dict(QUICK if args.quick else FULL)
    params |= {"sparse_optimizer": "adagrad", "mode": "sync"}
    for key, raw in args.extra.items():
        if key not in SETTABLE:
            raise ValueError(f"unknown option {key!r}; settable: {', '.join(SETTABLE)}")
        params[key] = raw if key in ("sparse_optimizer", "mode") else int(raw)
    return params


def lookup(params: dict[str, Any]) -> dict[str, Any]:
    """Both sides on one intra-op thread, as a server rank runs (and steadier on a busy host)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = run_lookup_bench(
            rows=params["lookup_rows"], batch=params["lookup_batch"], dim=DIM, slots=DIM
        )
    finally:
        torch.set_num_threads(threads)
    per_row = result.resident_bytes / result.rows
    return {
        "lookup_table_rows": result.rows,
        "lookup_insert_rows_per_s": result.ids_served / result.table_seconds,
        "dict_baseline_rows_per_s": result.ids_served / result.dict_seconds,
        "lookup_speedup": result.dict_seconds / result.table_seconds,
        "lookup_insert_rows_per_cpu_s": result.ids_served / result.table_cpu_seconds,
        "dict_baseline_rows_per_cpu_s": result.ids_served / result.dict_cpu_seconds,
        "strong_dict_ids_per_s": result.ids_served / result.strong_seconds,
        "strong_dict_ids_per_cpu_s": result.ids_served / result.strong_cpu_seconds,
        "lookup_speedup_vs_strong_dict": result.strong_seconds / result.table_seconds,
        "lookup_cpu_speedup_vs_strong_dict": result.strong_cpu_seconds / result.table_cpu_seconds,
        "resident_bytes_per_row": per_row,
        "row_payload_bytes": result.row_payload_bytes,
        "resident_overhead_bytes_per_row": per_row - result.row_payload_bytes,
    }


def optimizers(quick: bool) -> dict[str, Any]:
    rows, steps = (1000, 20) if quick else (4000, 50)
    out: dict[str, Any] = {}
    identical = True
    for name in ("adagrad", "adam"):
        comparison = compare_with_dense(name, rows=rows, dim=DIM, steps=steps, per_step=rows // 8)
        out[f"max_abs_diff_{name}"] = comparison.max_abs_diff
        identical = identical and comparison.untouched_identical
    out["max_abs_diff_vs_dense_optimizer"] = max(
        out["max_abs_diff_adagrad"], out["max_abs_diff_adam"]
    )
    out["untouched_rows_identical"] = identical
    return out


def _job(params: dict[str, Any], *, steps: int, dedup: bool, root: str) -> list[RankOutcome]:
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
        "dim": DIM,
        "sparse_optimizer": params["sparse_optimizer"],
        "mode": params["mode"],
        "dedup": dedup,
    }
    return run_algorithm("param_server", assignments, config, checkpoint_dir=root, timeout_s=3600)


def _bytes_after(outcomes: list[RankOutcome], steps: int) -> int:
    """Bytes sent by every rank during the first ``steps`` training steps."""
    total = 0
    for o in outcomes:
        sent = [v for s, v in o.series("bytes_sent") if s == steps - 1]
        assert sent, f"rank {o.rank} reported no bytes at step {steps - 1}"
        total += int(sent[-1])
    return total


def training(params: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as root:
        deduped = _job(params, steps=params["steps"], dedup=True, root=f"{root}/dedup")
        plain = _job(params, steps=params["plain_steps"], dedup=False, root=f"{root}/plain")
    servers = [o.result for o in deduped if o.role == "server"]
    lead = next(o.result for o in deduped if o.role == "worker")
    compared = params["plain_steps"]
    with_dedup = _bytes_after(deduped, compared) / compared
    without = _bytes_after(plain, compared) / compared
    return {
        "test_auc": lead["auc"],
        "ground_truth_auc": lead["ground_truth_auc"],
        "auc_gap": lead["ground_truth_auc"] - lead["auc"],
        "bytes_per_step": with_dedup,
        "bytes_per_step_without_dedup": without,
        "dedup_bytes_ratio": with_dedup / without,
        "live_rows": sum(s["live_rows"] for s in servers),
        "exported_rows": sum(s["exported_rows"] for s in servers),
        "live_rows_per_server": [s["live_rows"] for s in servers],
        "exported_rows_per_server": [s["exported_rows"] for s in servers],
        "samples_per_s": sum(o.result["samples_per_s"] for o in deduped if o.role == "worker") / 2,
        "final_loss": lead["loss"],
    }


def bench(args: BenchArgs) -> BenchReport:
    if args.netns:
        raise ValueError("param_server has no --netns benchmark yet: bytes are counted per rank")
    params = _params(args)
    results: dict[str, Any] = {}
    results |= optimizers(args.quick)
    results |= lookup(params)
    results |= training(params)
    return BenchReport(params={**params, "dim": DIM, "workers": 2, "servers": 2}, results=results)
