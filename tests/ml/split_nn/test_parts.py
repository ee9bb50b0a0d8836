"""In-process parts of split_nn: model building, combining, the batch schedule, alignment."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from tessera_ml.algorithms.split_nn.alignment import _common_positions
from tessera_ml.algorithms.split_nn.models import (
    bottom_model,
    combine,
    combined_width,
    output_width,
)
from tessera_ml.algorithms.split_nn.schedule import batch_rows, chunk_sizes, split_sizes
from tessera_ml.algorithms.split_nn.spec import SplitNNConfig


def tiny_model(in_features: int, out_features: int | None = None, width: int = 3) -> nn.Module:
    return nn.Sequential(nn.Linear(in_features, width), nn.Tanh())


def test_models_are_seeded_by_their_place_in_the_network() -> None:
    cfg = SplitNNConfig(seed=7)
    a, b, other = bottom_model(cfg, 0, 5), bottom_model(cfg, 0, 5), bottom_model(cfg, 1, 5)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)
    assert not torch.equal(next(a.parameters()), next(other.parameters()))
    assert output_width(a, 5, torch.float32) == cfg.bottom.out


def test_custom_factory_builds_the_bottom_model() -> None:
    cfg = SplitNNConfig.model_validate(
        {
            "bottom": {
                "kind": "custom",
                "factory": "tests.ml.split_nn.test_parts:tiny_model",
                "kwargs": {"width": 4},
            },
            "dtype": "float64",
        }
    )
    model = bottom_model(cfg, 0, 6)
    assert next(model.parameters()).dtype == torch.float64
    assert output_width(model, 6, torch.float64) == 4


def test_combine_concat_sum_mean() -> None:
    a, b = torch.ones(2, 3), torch.full((2, 3), 3.0)
    assert combine([a, b], "concat").shape == (2, 6)
    assert torch.equal(combine([a, b], "sum"), torch.full((2, 3), 4.0))
    assert torch.equal(combine([a, b], "mean"), torch.full((2, 3), 2.0))
    assert combined_width([3, 5], "concat") == 8
    with pytest.raises(ValueError, match="equal bottom output widths"):
        combined_width([3, 5], "sum")


def test_schedule_visits_each_row_once_per_epoch_and_is_reproducible() -> None:
    epoch = torch.cat([batch_rows(s, 50, 8, seed=3) for s in range(6)])
    assert epoch.unique().numel() == 48
    assert torch.equal(batch_rows(6, 50, 8, seed=3), batch_rows(6, 50, 8, seed=3))
    assert not torch.equal(batch_rows(0, 50, 8, seed=3), batch_rows(6, 50, 8, seed=3))
    assert split_sizes(10, 4) == [3, 3, 2, 2]
    assert chunk_sizes(10, 4) == [4, 4, 2]
    with pytest.raises(ValueError, match="fewer than one batch"):
        batch_rows(0, 5, 8, seed=0)


def test_alignment_orders_common_samples_by_label_ids() -> None:
    salt = b"s" * 16
    label_ids = np.array([5, 3, 9, 1])
    feature_ids = [np.array([9, 7, 3, 5]), np.array([1, 3, 5, 9, 11])]
    from tessera_ml.algorithms.split_nn.alignment import digests

    own, theirs = _common_positions(label_ids, [digests(f, salt) for f in feature_ids], salt)
    assert label_ids[own.numpy()].tolist() == [3, 5, 9]
    for ids, pos in zip(feature_ids, theirs, strict=True):
        assert ids[pos.numpy()].tolist() == [3, 5, 9]
