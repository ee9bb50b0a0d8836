"""The wrap-risk tool: every locally truncated value counted, step by step."""

import subprocess
import sys

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.bench.mpc_mixed.bench import Job, local_truncation_risk
from tessera_ml.bench.mpc_mixed.wraps import job_rows, wrap_risk


def test_several_steps_give_the_mean_risk_and_the_largest_steps() -> None:
    one = wrap_risk("mixed", batch=32, hidden=8)
    three = wrap_risk("mixed", batch=32, hidden=8, steps=3)
    assert (one.steps, three.steps) == (1, 3)
    # every step truncates the same values locally; the weights move, so the risk does too
    assert three.elements == one.elements > 0
    assert 0 < three.expected_per_step <= three.largest_per_step
    # each step's values counted for that step: no step holds most of the three steps' risk
    assert three.largest_per_step < 2 * three.expected_per_step
    assert one.expected_per_step == one.largest_per_step
    assert one.seen == three.seen == 0


def _cfg(**over: object) -> dict[str, object]:
    cfg: dict[str, object] = {
        "model": "mlp",
        "dataset": "digits",
        "hidden": [8],
        "batch_size": 32,
        "seed": 0,
        "learning_rate": 0.5,
    }
    return {**cfg, **over}


def test_the_benchmark_takes_the_risk_over_the_jobs_own_steps_batches_and_seed() -> None:
    local = Job("mixed", "tree", "local")
    risk = local_truncation_risk("mixed", local, _cfg(), steps=3)
    tool = wrap_risk("mixed", batch=32, hidden=8, steps=3)
    assert risk["local_truncation_expected_errors_per_step"] == tool.expected_per_step
    assert risk["local_truncation_expected_errors_per_run"] == 3 * tool.expected_per_step
    assert risk["local_truncation_expected_errors_largest_step"] == tool.largest_per_step
    assert risk["local_truncation_largest_value_bits"] == tool.largest_bits
    # another seed is another initialisation and other batches: another risk
    other = local_truncation_risk("mixed", local, _cfg(seed=1), steps=3)
    assert other["local_truncation_expected_errors_per_step"] != tool.expected_per_step
    # and another learning rate moves the weights elsewhere after the first step
    slower = local_truncation_risk("mixed", local, _cfg(learning_rate=0.05), steps=3)
    assert slower["local_truncation_expected_errors_per_step"] != tool.expected_per_step


def test_no_risk_is_reported_for_masked_truncation_or_a_model_the_tool_does_not_step() -> None:
    assert local_truncation_risk("mixed", Job("mixed", "tree", "masked"), _cfg(), 3) == {}
    local = Job("all64", "tree", "local")
    assert local_truncation_risk("all64", local, _cfg(model="cnn"), 3) == {}
    assert local_truncation_risk("all64", local, _cfg(hidden=[8, 8]), 3) == {}


@pytest.mark.parametrize("batch", [128, 512, 1000])
def test_the_tool_steps_through_the_batches_a_compute_party_draws(batch: int) -> None:
    """Eight epochs, as the benchmark's jobs run; an epoch's partial batch is dropped, so at a
    large batch the epochs hold much fewer than ``n`` rows."""
    n, seed, epochs = 1411, 3, 8
    drawn = [idx for epoch in range(epochs) for idx in data.batches(n, batch, epoch, seed)]
    rows = job_rows(n, batch, len(drawn), seed)
    assert len(rows) == len(drawn) == epochs * (n // batch)
    assert all(torch.equal(a, b) for a, b in zip(rows, drawn, strict=True))
    assert torch.equal(job_rows(n, batch, 1, seed)[0], drawn[0])
    assert not torch.equal(job_rows(n, batch, 1, seed + 1)[0], drawn[0])


def test_a_batch_larger_than_the_training_rows_an_empty_batch_or_no_step_is_refused() -> None:
    with pytest.raises(ValueError, match="more than the 1411 training rows"):
        job_rows(1411, 2000, 1, 0)
    with pytest.raises(ValueError, match="at least one step, not 0"):
        job_rows(1411, 128, 0, 0)
    for batch in (0, -128):
        with pytest.raises(ValueError, match=f"at least one row, not {batch}"):
            job_rows(1411, batch, 1, 0)


def test_the_command_line_says_what_is_wrong_without_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tessera_ml.bench.mpc_mixed.wraps", "--batch", "2000"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "a batch of 2000 is more than the 1411 training rows" in done.stderr
    assert "Traceback" not in done.stderr
