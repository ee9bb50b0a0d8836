"""A job's batches: what the compute parties train on epoch after epoch is what the data holders
look up step by step."""

from __future__ import annotations

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed import data


@pytest.mark.parametrize("batch", [128, 512, 1000])
def test_each_steps_rows_are_the_batch_the_epochs_train_on(batch: int) -> None:
    n, seed, epochs = 1411, 3, 8
    drawn = [idx for epoch in range(epochs) for idx in data.batches(n, batch, epoch, seed)]
    assert len(drawn) == epochs * data.batches_per_epoch(n, batch) == epochs * (n // batch)
    for step, idx in enumerate(drawn):
        assert torch.equal(data.step_rows(n, batch, step, seed), idx)


def test_an_epoch_holds_distinct_rows_and_the_next_one_is_shuffled_anew() -> None:
    n, batch, seed = 1411, 128, 0
    per_epoch = data.batches_per_epoch(n, batch)
    epoch = torch.cat([data.step_rows(n, batch, step, seed) for step in range(per_epoch)])
    assert epoch.unique().numel() == per_epoch * batch
    assert not torch.equal(
        data.step_rows(n, batch, per_epoch, seed), data.step_rows(n, batch, 0, seed)
    )
    assert not torch.equal(data.step_rows(n, batch, 0, seed + 1), data.step_rows(n, batch, 0, seed))


def test_a_batch_larger_than_the_training_rows_is_refused() -> None:
    with pytest.raises(ValueError, match="batch_size 2000 exceeds the 1411 training rows"):
        data.step_rows(1411, 2000, 0, 0)


@pytest.mark.parametrize("batch", [0, -128])
def test_an_empty_or_negative_batch_is_refused_not_divided_by(batch: int) -> None:
    with pytest.raises(ValueError, match=f"at least one row, not {batch}"):
        data.batches_per_epoch(1411, batch)
    with pytest.raises(ValueError, match=f"at least one row, not {batch}"):
        data.step_rows(1411, batch, 0, 0)
