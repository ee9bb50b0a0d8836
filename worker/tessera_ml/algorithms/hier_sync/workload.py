"""The data and model a ``hier_sync`` job trains: small, seeded and identical on every rank.

Datasets: scikit-learn's bundled classification sets or a generated one. Each rank reads the
rows of a seeded permutation congruent to its rank, so ranks see disjoint samples and any
run with the same seed and world sees the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

_BUNDLED = ("digits", "breast_cancer", "wine")


@dataclass(frozen=True)
class Dataset:
    features: torch.Tensor
    labels: torch.Tensor
    num_classes: int

    @property
    def num_features(self) -> int:
        return int(self.features.shape[1])


def load_dataset(ref: str, seed: int) -> Dataset:
    """``digits``, ``breast_cancer``, ``wine`` or ``synthetic:<features>:<classes>``."""
    if ref in _BUNDLED:
        from sklearn import datasets

        loader = getattr(datasets, f"load_{ref}")
        x, y = loader(return_X_y=True)
        features = torch.tensor(x, dtype=torch.float32)
        features = (features - features.mean(0)) / features.std(0).clamp_min(1e-6)
        labels = torch.tensor(y, dtype=torch.int64)
        return Dataset(features, labels, int(labels.max()) + 1)
    if ref.startswith("synthetic:"):
        try:
            _, num_features, num_classes = ref.split(":")
            f, c = int(num_features), int(num_classes)
        except ValueError as exc:
            raise ValueError(
                f"synthetic dataset is 'synthetic:<features>:<classes>': {ref}"
            ) from exc
        generator = torch.Generator().manual_seed(seed + 7919)
        features = torch.randn(4096, f, generator=generator)
        teacher = torch.randn(f, c, generator=generator)
        return Dataset(features, (features @ teacher).argmax(1), c)
    raise ValueError(f"unknown dataset {ref!r}: use {', '.join(_BUNDLED)} or synthetic:F:C")


def build_mlp(num_features: int, hidden: list[int], num_classes: int, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    width = num_features
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


class Batches:
    """The batches of one rank: disjoint rows per rank, cycling through them."""

    def __init__(self, data: Dataset, rank: int, world_size: int, batch_size: int, seed: int):
        order = torch.randperm(len(data.labels), generator=torch.Generator().manual_seed(seed))
        self.rows = order[rank::world_size]
        if len(self.rows) == 0:
            raise ValueError(f"the dataset has too few rows for {world_size} ranks")
        self.data = data
        self.batch_size = batch_size

    def __call__(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = step * self.batch_size
        index = torch.arange(start, start + self.batch_size) % len(self.rows)
        rows = self.rows[index]
        return self.data.features[rows], self.data.labels[rows]
