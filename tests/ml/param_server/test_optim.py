"""Sparse row optimizers against torch's dense optimizers on the same gradients."""

from __future__ import annotations

import pytest
import torch

from tessera_ml.algorithms.param_server.optim import make_optimizer
from tessera_ml.bench.param_server.reference import compare_with_dense


@pytest.mark.parametrize("name", ["sgd", "adagrad", "adam"])
def test_sparse_optimizer_matches_dense_torch(name: str) -> None:
    result = compare_with_dense(name, rows=400, dim=6, steps=25, per_step=60)
    assert result.touched_rows > 200
    assert result.max_abs_diff <= 1e-6
    assert result.untouched_identical


def test_adam_counts_steps_per_row() -> None:
    adam = make_optimizer("adam", 0.1)
    rows = torch.zeros(2, 3 + adam.slots(3))
    grad = torch.ones(2, 3)
    rows = adam.update(rows, grad)
    rows[1:] = adam.update(rows[1:].clone(), grad[1:])
    assert rows[:, -1].tolist() == [1.0, 2.0]
    # the first Adam step moves every coordinate by lr (bias-corrected m / sqrt(v) = 1)
    assert torch.allclose(rows[0, :3], torch.full((3,), -0.1))


def test_unknown_optimizer_and_bad_rate_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown sparse optimizer"):
        make_optimizer("rmsprop", 0.1)
    with pytest.raises(ValueError, match="positive"):
        make_optimizer("sgd", 0.0)
