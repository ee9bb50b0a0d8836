"""``tessera bench param_server``: the table, the optimizers and whole jobs, each beside a baseline.

- *lookup*: lookup-or-insert of a growing table against a dict from id to row index over one
  growing tensor read with ``index_select`` (the strong baseline) and a Python dict of row
  tensors (the weak one), on the same batches (Zipf(1.1) ids over 2**34 ranks, so most ids of
  a batch are new), and the table's resident bytes per row against the row payload;
- *optimizers*: sparse Adagrad and Adam against torch's dense optimizers;
- *training*: two servers and two workers on the generated Zipf click log (``generated:clicks``),
  with deduplication and without it (same batches), and the test AUC against the AUC of the
  generating model on the same test rows; then the same model, data and optimizers without
  dynamic tables (``static_hash``: a hashed ``nn.EmbeddingBag`` replicated on the two workers,
  as large as the dynamic tables grew), its step time and test AUC beside the job's. The job
  and the baseline run ``repeats`` times in turn, and the step-time ratio is the median of the
  pairs'.

``--set parts=training`` (any of ``optimizers,lookup,training``) runs only the parts named.
"""

from __future__ import annotations

import statistics
import tempfile
from typing import Any

import torch

from tessera_ml.bench.api import BenchArgs, BenchReport
from tessera_ml.bench.param_server.lookup_bench import LookupResult, run_lookup_bench
from tessera_ml.bench.param_server.reference import compare_with_dense
from tessera_ml.bench.param_server.static_hash import (
    StaticHashRun,
    equal_memory_rows,
    run_static_hash,
)
from tessera_ml.bench.param_server.table_e2e import samples_per_s_by_table
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
    "repeats",
    "sparse_optimizer",
    "mode",
    "parts",
)
PARTS = ("optimizers", "lookup", "training")
TEXT_OPTIONS = ("sparse_optimizer", "mode", "parts")
FULL = {
    "steps": 2000,
    "batch_size": 1024,
    "rows": 2_000_000,
    "ids": 1000,
    "fields": 8,
    "lookup_rows": 1_000_000,
    "lookup_batch": 262_144,
    "plain_steps": 50,
    "repeats": 3,
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
    "repeats": 1,
}
DIM = 16


def _params(args: BenchArgs) -> dict[str, Any]:
    params: dict[str, Any] = dict(QUICK if args.quick else FULL)
    params |= {"sparse_optimizer": "adagrad", "mode": "sync", "parts": ",".join(PARTS)}
    for key, raw in args.extra.items():
        if key not in SETTABLE:
            raise ValueError(f"unknown option {key!r}; settable: {', '.join(SETTABLE)}")
        params[key] = raw if key in TEXT_OPTIONS else args.extra.integer(key, 0)
    if params["plain_steps"] < 2:
        raise ValueError("plain_steps must be at least 2 (bytes are compared over all but one)")
    if params["repeats"] < 1:
        raise ValueError("repeats must be at least 1")
    unknown = set(params["parts"].split(",")) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}; parts: {', '.join(PARTS)}")
    return params


def _lookup_keys(result: LookupResult, prefix: str) -> dict[str, Any]:
    served, clocks = result.ids_served, result.clocks
    table, strong = clocks["table"], clocks["strong"]
    per_row = result.resident_bytes / result.rows
    factorize = result.factorize_ids / result.factorize.cpu
    out: dict[str, Any] = {
        "lookup_table": result.table,
        "lookup_table_rows": result.rows,
        "lookup_ids_served": served,
        "lookup_insert_ids_per_s": served / table.wall,
        "lookup_insert_ids_per_cpu_s": served / table.cpu,
        "strong_dict_ids_per_s": served / strong.wall,
        "strong_dict_ids_per_cpu_s": served / strong.cpu,
        "lookup_speedup_vs_strong_dict": strong.wall / table.wall,
        "lookup_cpu_speedup_vs_strong_dict": strong.cpu / table.cpu,
        "native_factorize": "pyarrow dictionary_encode",
        "native_factorize_ids_per_cpu_s": factorize,
        "lookup_cpu_vs_native_factorize": served / table.cpu / factorize,
        "resident_bytes_per_row": per_row,
        "row_payload_bytes": result.row_payload_bytes,
        "resident_overhead_bytes_per_row": per_row - result.row_payload_bytes,
    }
    if "table_threads" in clocks:
        threaded = clocks["table_threads"]
        out |= {
            "lookup_threads": result.threads,
            "lookup_insert_ids_per_s_threads": served / threaded.wall,
            "lookup_thread_speedup": table.wall / threaded.wall,
            "lookup_insert_ids_per_process_cpu_s_threads": served / threaded.process_cpu,
        }
    if "fallback" in clocks:
        fallback = clocks["fallback"]
        out |= {
            "fallback_lookup_insert_ids_per_s": served / fallback.wall,
            "fallback_lookup_insert_ids_per_cpu_s": served / fallback.cpu,
            "lookup_cpu_speedup_vs_fallback": fallback.cpu / table.cpu,
        }
    if clocks["dict"].cpu > 0:
        weak = clocks["dict"]
        out |= {
            "dict_baseline_ids_per_s": served / weak.wall,
            "dict_baseline_ids_per_cpu_s": served / weak.cpu,
            "lookup_speedup": weak.wall / table.wall,
        }
    return {f"{prefix}{key}": value for key, value in out.items()}


def lookup(params: dict[str, Any]) -> dict[str, Any]:
    """The table at ``lookup_rows`` rows and at ten times that (without the weak dict and the
    torch table there). One intra-op thread, as a server rank runs; the compiled table once
    more with two threads of its own."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out: dict[str, Any] = {}
    try:
        for prefix, rows, small in (
            ("", params["lookup_rows"], True),
            ("large_", 10 * params["lookup_rows"], False),
        ):
            result = run_lookup_bench(
                rows=rows,
                batch=params["lookup_batch"],
                dim=DIM,
                slots=DIM,
                weak_dict=small,
                fallback=small,
            )
            out |= _lookup_keys(result, prefix)
            del result
    finally:
        torch.set_num_threads(threads)
    e2e = {**params, "dim": DIM}
    return out | samples_per_s_by_table(e2e, steps=max(1, params["steps"] // 4))


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


WORKER_PARTIES = ("clicks-a", "clicks-b")


def _dataset(params: dict[str, Any]) -> str:
    return (
        f"generated:clicks?rows={params['rows']}&fields={params['fields']}"
        f"&ids={params['ids']}&zipf=1.1&test=0.05"
    )


def _config(params: dict[str, Any], *, steps: int, dedup: bool) -> dict[str, Any]:
    return {
        "steps": steps,
        "batch_size": params["batch_size"],
        "dim": DIM,
        "sparse_optimizer": params["sparse_optimizer"],
        "mode": params["mode"],
        "dedup": dedup,
    }


def _job(params: dict[str, Any], *, steps: int, dedup: bool, root: str) -> list[RankOutcome]:
    assignments: list[dict[str, Any]] = [
        {"party": "servers", "role": "server", "processes": 2},
        *({"party": p, "role": "worker", "dataset": _dataset(params)} for p in WORKER_PARTIES),
    ]
    config = _config(params, steps=steps, dedup=dedup)
    return run_algorithm("param_server", assignments, config, checkpoint_dir=root, timeout_s=3600)


def _bytes_after(outcomes: list[RankOutcome], steps: int) -> int:
    """Bytes sent by every rank during the first ``steps`` training steps."""
    total = 0
    for o in outcomes:
        sent = [v for s, v in o.series("bytes_sent") if s == steps - 1]
        assert sent, f"rank {o.rank} reported no bytes at step {steps - 1}"
        total += int(sent[-1])
    return total


def static_hash(params: dict[str, Any], table_bytes: int) -> dict[str, Any]:
    """The same job without dynamic tables (``static_hash``): a hashed table replicated on the
    same two worker processes, each copy as large as the dynamic tables at the end of their run
    (parameters and optimizer state, against every byte the servers' tables hold)."""
    rows = equal_memory_rows(table_bytes, DIM, params["sparse_optimizer"])
    config = _config(params, steps=params["steps"], dedup=True)
    workers = run_static_hash(StaticHashRun(_dataset(params), rows, config), WORKER_PARTIES)
    return {
        "static_hash_rows": rows,
        "static_hash_table_bytes": workers[0]["table_bytes"],
        "static_hash_step_time_s": max(w["step_time_s"] for w in workers),
        "static_hash_test_auc": workers[0]["auc"],
        "static_hash_final_loss": workers[0]["loss"],
    }


def _resident_bytes(outcomes: list[RankOutcome]) -> int:
    """Every byte the servers' tables hold at the end of a job."""
    return sum(int(o.result["resident_bytes"]) for o in outcomes if o.role == "server")


def _step_time(outcomes: list[RankOutcome], batch_size: int) -> float:
    """The training loop's wall time per step, slowest worker (as for the baseline)."""
    workers = [o.result for o in outcomes if o.role == "worker"]
    return max(batch_size * len(workers) / w["samples_per_s"] for w in workers)


def training(params: dict[str, Any]) -> dict[str, Any]:
    """The job and its static-table baseline, ``repeats`` times in turn: each pair of runs meets
    the same load on a shared host, and the ratio is the median of the pairs'."""
    with tempfile.TemporaryDirectory() as root:
        plain = _job(params, steps=params["plain_steps"], dedup=False, root=f"{root}/plain")
        runs, baselines = [], []
        for r in range(params["repeats"]):
            runs.append(_job(params, steps=params["steps"], dedup=True, root=f"{root}/dedup{r}"))
            baselines.append(static_hash(params, _resident_bytes(runs[0])))
    deduped = runs[0]
    servers = [o.result for o in deduped if o.role == "server"]
    workers = [o.result for o in deduped if o.role == "worker"]
    lead = workers[0]
    # all but the plain run's last step: by then both runs have also sent the next step's pull
    compared = params["plain_steps"] - 1
    with_dedup = _bytes_after(deduped, compared) / compared
    without = _bytes_after(plain, compared) / compared
    step_times = [_step_time(run, params["batch_size"]) for run in runs]
    static_times = [b["static_hash_step_time_s"] for b in baselines]
    ratios = [t / s for t, s in zip(step_times, static_times, strict=True)]
    out = {
        "test_auc": lead["auc"],
        "ground_truth_auc": lead["ground_truth_auc"],
        "auc_gap": lead["ground_truth_auc"] - lead["auc"],
        "step_time_s": statistics.median(step_times),
        "step_time_s_runs": step_times,
        "bytes_per_step": with_dedup,
        "bytes_per_step_without_dedup": without,
        "dedup_bytes_ratio": with_dedup / without,
        "live_rows": sum(s["live_rows"] for s in servers),
        "exported_rows": sum(s["exported_rows"] for s in servers),
        "live_rows_per_server": [s["live_rows"] for s in servers],
        "exported_rows_per_server": [s["exported_rows"] for s in servers],
        "table_resident_bytes": _resident_bytes(deduped),
        "samples_per_s": sum(w["samples_per_s"] for w in workers) / len(workers),
        "final_loss": lead["loss"],
    }
    out |= baselines[0]
    out |= {
        "static_hash_step_time_s": statistics.median(static_times),
        "static_hash_step_time_s_runs": static_times,
        "step_time_ratio_vs_static_hash": statistics.median(ratios),
        "step_time_ratio_vs_static_hash_runs": ratios,
        "test_auc_minus_static_hash": out["test_auc"] - baselines[0]["static_hash_test_auc"],
    }
    return out


TAKES_MODEL = False
"""Its model is set with ``--set``, not ``--model``."""


def bench(args: BenchArgs) -> BenchReport:
    if args.netns:
        raise ValueError("param_server has no --netns benchmark yet: bytes are counted per rank")
    params = _params(args)
    results: dict[str, Any] = {}
    parts = params["parts"].split(",")
    if "optimizers" in parts:
        results |= optimizers(args.quick)
    if "lookup" in parts:
        results |= lookup(params)
    if "training" in parts:
        results |= training(params)
    return BenchReport(params={**params, "dim": DIM, "workers": 2, "servers": 2}, results=results)
