"""A 1000-step zo_pair job of four processors over two parties, as the platform plans it."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tessera_ml.algorithms.zo_pair.model import checksum, evaluate, make_model
from tessera_ml.data.resolver import resolve
from tests.ml.zo_pair.world import LONG_JOB


class Outcome:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.result: dict[str, Any] = raw["result"]
        self.points: list[tuple[int, str, float]] = raw["points"]

    def series(self, name: str) -> list[tuple[int, float]]:
        return [(s, v) for s, n, v in self.points if n == name]


STEPS, N = LONG_JOB["steps"], 4


@pytest.fixture(scope="module")
def job(world: list[dict[str, Any]]) -> list[Outcome]:
    return [Outcome(r["platform"]) for r in world]


def _initial_model() -> torch.nn.Module:
    return make_model(LONG_JOB["model"], resolve(LONG_JOB["dataset"]), seed=LONG_JOB["seed"])


def test_all_copies_are_bit_identical_after_1000_steps(job: list[Outcome]) -> None:
    sums = {o.result["checksum"] for o in job}
    assert len(sums) == 1
    assert {o.result["initial_checksum"] for o in job} == {checksum(_initial_model())}
    assert sums != {checksum(_initial_model())}
    assert all(o.result["steps"] == STEPS == 1000 for o in job)


def test_training_learns_and_rank_zero_reports_evaluation(job: list[Outcome]) -> None:
    before = evaluate(_initial_model(), resolve(LONG_JOB["dataset"]), torch.device("cpu"))
    after = job[0].result
    assert after["eval_loss"] < 0.5 * before["eval_loss"]
    assert after["accuracy"] > before["accuracy"] + 0.2
    assert [s for s, _ in job[0].series("accuracy")] == [500, 1000]
    assert all(o.series("accuracy") == [] for o in job[1:])


def test_only_loss_scalars_cross_the_network(job: list[Outcome]) -> None:
    inputs_per_processor = 2
    for o in job:
        (s0, b0), (s1, b1) = o.series("bytes_sent")[0], o.series("bytes_sent")[-1]
        per_step = (b1 - b0) / (s1 - s0)
        assert per_step == (N - 1) * inputs_per_processor * 4
        assert per_step <= 16 * inputs_per_processor
        assert b1 == o.result["bytes_sent"]


def test_z_is_generated_twice_per_step(job: list[Outcome]) -> None:
    for o in job:
        assert o.result["z_generations"] == 2 * STEPS
        assert {v for _, v in o.series("z_generations")} == {2.0}


def test_dashboard_metrics_are_reported(job: list[Outcome]) -> None:
    names = {n for _, n, _ in job[1].points}
    expected = {"loss", "grad_scalar_mean", "grad_scalar_std", "grad_scalar_abs_max", "lr"}
    assert expected | {"step_time_s", "throughput", "bytes_sent", "bytes_received"} <= names
    assert [s for s, _ in job[1].series("loss")] == [250, 500, 750, 1000]
    assert all(v > 0 for _, v in job[1].series("step_time_s"))
