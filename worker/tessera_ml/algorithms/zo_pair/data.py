"""Party-local inputs for ``zo_pair``: a bundled or generated table, split and read in pairs.

Each pair reads its own stream of inputs (two micro-batches per step) in an order derived from
the job seed, the pair index and the epoch, so both processors of a pair read the same inputs
without exchanging anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tessera_ml.algorithms.zo_pair.seeds import data_seed, mix

_BUNDLED = ("digits", "breast_cancer", "wine", "diabetes")


@dataclass(frozen=True)
class Table:
    """Features (float32) and targets (int64 class ids, or float32 for regression)."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    """0 for regression."""

    @property
    def num_features(self) -> int:
        return int(self.x_train.shape[1])


def load_table(ref: str, *, seed: int, test_fraction: float) -> Table:
    """``digits``, ``breast_cancer``, ``wine``, ``diabetes`` (scikit-learn) or ``synthetic``."""
    name = ref.removeprefix("sklearn:")
    if name == "synthetic":
        x, y, classes = _synthetic(seed)
    elif name in _BUNDLED:
        x, y, classes = _bundled(name)
    else:
        raise ValueError(f"unknown dataset {ref!r} (known: {', '.join((*_BUNDLED, 'synthetic'))})")
    order = np.random.default_rng(mix(7, seed)).permutation(len(x))
    n_test = max(1, round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    mean, std = x[train].mean(0), x[train].std(0) + 1e-6
    x = ((x - mean) / std).astype(np.float32)
    ty = torch.int64 if classes else torch.float32
    return Table(
        torch.from_numpy(x[train]),
        torch.from_numpy(y[train]).to(ty),
        torch.from_numpy(x[test]),
        torch.from_numpy(y[test]).to(ty),
        classes,
    )


def restrict_classes(table: Table, classes: set[int]) -> Table:
    """The same split keeping only examples whose label is in ``classes``."""
    keep_train = torch.tensor([int(c) in classes for c in table.y_train])
    keep_test = torch.tensor([int(c) in classes for c in table.y_test])
    return Table(
        table.x_train[keep_train],
        table.y_train[keep_train],
        table.x_test[keep_test],
        table.y_test[keep_test],
        table.num_classes,
    )


def _bundled(name: str) -> tuple[np.ndarray, np.ndarray, int]:
    from sklearn import datasets

    loader = getattr(datasets, f"load_{name}")
    x, y = loader(return_X_y=True)
    if name == "diabetes":
        return x.astype(np.float64), ((y - y.mean()) / y.std()).astype(np.float32), 0
    return x.astype(np.float64), y.astype(np.int64), int(y.max()) + 1


def _synthetic(
    seed: int, n: int = 2048, features: int = 16, classes: int = 4
) -> tuple[np.ndarray, np.ndarray, int]:
    rng = np.random.default_rng(mix(11, seed))
    centers = rng.normal(0, 2.0, size=(classes, features))
    y = rng.integers(0, classes, size=n)
    x = centers[y] + rng.normal(0, 1.0, size=(n, features))
    return x, y.astype(np.int64), classes


class PairStream:
    """The inputs of one pair: step ``t`` reads two micro-batches, epoch after epoch."""

    def __init__(
        self, x: torch.Tensor, y: torch.Tensor, *, pair: int, job_seed: int, micro_batch: int
    ):
        if len(x) < 2 * micro_batch:
            raise ValueError(
                f"a pair reads {2 * micro_batch} examples per step but the data has {len(x)}"
            )
        self.x, self.y = x, y
        self.pair, self.job_seed, self.micro_batch = pair, job_seed, micro_batch
        self._epoch = -1
        self._order = torch.empty(0, dtype=torch.int64)

    def inputs(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The step's two inputs stacked: features ``[2, micro_batch, F]``, targets ``[2, mb]``."""
        per_step = 2 * self.micro_batch
        steps_per_epoch = len(self.x) // per_step
        epoch, offset = divmod(step, steps_per_epoch)
        if epoch != self._epoch:
            gen = torch.Generator().manual_seed(data_seed(self.job_seed, self.pair, epoch))
            self._order = torch.randperm(len(self.x), generator=gen)
            self._epoch = epoch
        idx = self._order[offset * per_step : (offset + 1) * per_step]
        return (
            self.x[idx].view(2, self.micro_batch, -1),
            self.y[idx].view(2, self.micro_batch),
        )
