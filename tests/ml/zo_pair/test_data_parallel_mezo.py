"""The data-parallel MeZO baseline of the benchmark, on the shared four-rank world."""

from __future__ import annotations

from typing import Any

import numpy as np

from tessera_ml.algorithms.zo_pair.seeds import direction_seed
from tessera_ml.bench.zo_pair.mezo import MezoStep
from tests.ml.zo_pair.world import EPS, LR, STEPS, _model, all_inputs

N = 4


def test_each_rank_evaluates_its_share_and_all_take_single_process_mezos_step(
    world: list[dict[str, Any]],
) -> None:
    reference = MezoStep(
        _model(), epsilon=EPS, lr=LR, task="classification", distribution="rademacher"
    )
    start = [p.detach().clone() for p in reference.model.parameters()]
    for step in range(STEPS):
        reference.step(direction_seed(7, step, 0), *all_inputs(step, N))
    expected = [p.detach().numpy() for p in reference.model.parameters()]
    ranks = [r["data_parallel_mezo"]["params"] for r in world]
    for params in ranks[1:]:
        for mine, first in zip(params, ranks[0], strict=True):
            np.testing.assert_array_equal(mine, first)
    moved = max(float(np.abs(p - s.numpy()).max()) for p, s in zip(ranks[0], start, strict=True))
    assert moved > 1e-4
    for got, want in zip(ranks[0], expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_one_float64_scalar_is_all_reduced_per_step(world: list[dict[str, Any]]) -> None:
    ring_bytes_per_step = 2 * (N - 1) / N * 8
    for rank in world:
        assert rank["data_parallel_mezo"]["sent"] == STEPS * ring_bytes_per_step
