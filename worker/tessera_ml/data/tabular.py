"""In-memory datasets as tensors: features, targets and sample ids, with a fixed split."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch

Task = Literal["classification", "binary", "regression"]


@dataclass(frozen=True)
class Table:
    """Rows of one split. ``y`` is None for a party that holds features only.

    ``x`` is float32 ``[rows, columns]`` (int64 category ids for the click log); ``y`` is int64
    class indices for classification, float32 in {0, 1} for binary, float32 for regression;
    ``ids`` are int64 sample ids, unique within the dataset.
    """

    x: torch.Tensor
    y: torch.Tensor | None
    ids: torch.Tensor

    def __post_init__(self) -> None:
        assert self.x.shape[0] == self.ids.shape[0], "x and ids differ in rows"
        assert self.y is None or self.y.shape[0] == self.ids.shape[0], "y and ids differ in rows"

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def rows(self, index: torch.Tensor) -> Table:
        return Table(self.x[index], None if self.y is None else self.y[index], self.ids[index])


@dataclass(frozen=True)
class Dataset:
    """A named dataset: train and test tables plus what models need to know about it."""

    name: str
    train: Table
    test: Table
    task: Task
    columns: tuple[str, ...]
    num_classes: int = 1
    image_shape: tuple[int, ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_features(self) -> int:
        return len(self.columns)

    @property
    def num_outputs(self) -> int:
        """Output width a model needs: classes for multi-class, else 1."""
        return self.num_classes if self.task == "classification" else 1

    def with_tables(self, train: Table, test: Table, **changes: Any) -> Dataset:
        return replace(self, train=train, test=test, **changes)


def split_by_id(
    ids: torch.Tensor, test_fraction: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Train and test row indices, decided by a hash of each sample id.

    Parties holding different columns of the same samples agree on the split without talking,
    whatever order their rows are in.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test fraction must be in (0, 1), got {test_fraction}")
    with np.errstate(over="ignore"):
        h = ids.numpy().astype(np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        h = h ^ (h >> np.uint64(31))
    unit = torch.from_numpy((h >> np.uint64(11)).astype(np.float64) / float(1 << 53))
    is_test = unit < test_fraction
    return torch.nonzero(~is_test).flatten(), torch.nonzero(is_test).flatten()


def standardize(train: Table, test: Table) -> tuple[Table, Table]:
    """Scale float features by the train split's mean and standard deviation."""
    mean = train.x.mean(0, keepdim=True)
    std = train.x.std(0, keepdim=True).clamp_min(1e-6)
    return (
        Table((train.x - mean) / std, train.y, train.ids),
        Table((test.x - mean) / std, test.y, test.ids),
    )
