"""``tessera bench param_server``'s training part: the job and its static-table baseline, run
in turn, on a tiny log."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from tessera_ml.bench.api import BenchArgs
from tessera_ml.bench.param_server.bench import _params, training

pytestmark = pytest.mark.slow


def test_each_job_run_is_paired_with_a_baseline_run_and_the_ratio_is_the_pairs_median() -> None:
    extra = {"steps": "6", "batch_size": "32", "rows": "3000", "plain_steps": "3", "repeats": "2"}
    params = _params(BenchArgs(quick=True, extra=extra))
    out: dict[str, Any] = training(params)

    job, static = out["step_time_s_runs"], out["static_hash_step_time_s_runs"]
    ratios = out["step_time_ratio_vs_static_hash_runs"]
    assert len(job) == len(static) == len(ratios) == 2
    assert ratios == [t / s for t, s in zip(job, static, strict=True)]
    assert out["step_time_ratio_vs_static_hash"] == statistics.median(ratios)
    assert out["step_time_s"] == statistics.median(job)
    assert out["static_hash_step_time_s"] == statistics.median(static)
    # equal memory: the baseline's parameters and Adagrad state as large as the dynamic tables
    assert out["static_hash_table_bytes"] <= out["table_resident_bytes"]
    assert out["static_hash_rows"] == out["table_resident_bytes"] // (2 * 16 * 4)
    assert out["exported_rows"] == out["live_rows"] > 0
    assert 0.0 <= out["test_auc"] <= 1.0 and 0.0 <= out["static_hash_test_auc"] <= 1.0
    assert out["dedup_bytes_ratio"] < 1.0
