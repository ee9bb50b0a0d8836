"""A zo_pair job as the platform runs it: four processors on a real gloo world."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tessera_ml.algorithms.zo_pair.model import checksum, evaluate, make_model
from tessera_ml.data.resolver import resolve
from tessera_ml.testing import RankOutcome, run_algorithm

STEPS, N = 1000, 4
CONFIG: dict[str, Any] = {
    "seed": 5,
    "steps": STEPS,
    "dataset": "sklearn:wine",
    "model": {"kind": "mlp", "hidden": [8]},
    "micro_batch": 4,
    "lr": 0.01,
    "epsilon": 1e-3,
    "eval_every": 500,
    "log_every": 250,
}
ASSIGNMENTS = [
    {"party": "alice", "role": "processor", "processes": 3},
    {"party": "bob", "role": "processor", "processes": 1},
]


@pytest.fixture(scope="module")
def job() -> list[RankOutcome]:
    return run_algorithm("zo_pair", ASSIGNMENTS, CONFIG)


def _initial_model() -> torch.nn.Module:
    return make_model(CONFIG["model"], resolve("sklearn:wine"), seed=5)


def test_all_copies_are_bit_identical_after_1000_steps(job: list[RankOutcome]) -> None:
    sums = {o.result["checksum"] for o in job}
    assert len(sums) == 1
    assert {o.result["initial_checksum"] for o in job} == {checksum(_initial_model())}
    assert sums != {checksum(_initial_model())}
    assert all(o.result["steps"] == STEPS for o in job)


def test_training_learns_and_rank_zero_reports_evaluation(job: list[RankOutcome]) -> None:
    before = evaluate(_initial_model(), resolve("sklearn:wine"), torch.device("cpu"))
    after = dict(job[0].result)
    assert after["eval_loss"] < 0.5 * before["eval_loss"]
    assert after["accuracy"] > before["accuracy"] + 0.2
    assert [s for s, _ in job[0].series("accuracy")] == [500, 1000]
    assert all(o.series("accuracy") == [] for o in job[1:])


def test_only_loss_scalars_cross_the_network(job: list[RankOutcome]) -> None:
    inputs_per_processor = 2
    for o in job:
        (s0, b0), (s1, b1) = o.series("bytes_sent")[0], o.series("bytes_sent")[-1]
        per_step = (b1 - b0) / (s1 - s0)
        assert per_step == (N - 1) * inputs_per_processor * 4
        assert per_step <= 16 * inputs_per_processor
        assert b1 == o.result["bytes_sent"]


def test_z_is_generated_twice_per_step(job: list[RankOutcome]) -> None:
    for o in job:
        assert o.result["z_generations"] == 2 * STEPS
        assert {v for _, v in o.series("z_generations")} == {2.0}


def test_dashboard_metrics_are_reported(job: list[RankOutcome]) -> None:
    names = {p.name for p in job[1].points}
    expected = {"loss", "grad_scalar_mean", "grad_scalar_std", "grad_scalar_abs_max", "lr"}
    assert expected | {"step_time_s", "throughput", "bytes_sent", "bytes_received"} <= names
    assert [s for s, _ in job[1].series("loss")] == [250, 500, 750, 1000]
    assert all(v > 0 for _, v in job[1].series("step_time_s"))
