"""Party-local data for the features and labels parties: scikit-learn's bundled sets, split into
train and test rows by the job seed (both parties derive the same split), features scaled to
[0, 1] with training-set statistics so fixed point keeps its precision."""

from __future__ import annotations

from dataclasses import dataclass

import torch

DATASETS = ("digits", "breast_cancer", "wine")


@dataclass(frozen=True)
class Split:
    train: torch.Tensor
    test: torch.Tensor


def _load(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn import datasets

    loaders = {
        "digits": datasets.load_digits,
        "breast_cancer": datasets.load_breast_cancer,
        "wine": datasets.load_wine,
    }
    if name not in loaders:
        raise ValueError(f"unknown dataset {name!r} (known: {', '.join(DATASETS)})")
    bunch = loaders[name]()
    x = torch.tensor(bunch.data, dtype=torch.float64)
    y = torch.tensor(bunch.target, dtype=torch.int64)
    return x, y


def _order(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    cut = n - n // 5
    return perm[:cut], perm[cut:]


def dataset_name(ref: str | None, default: str) -> str:
    if ref is None:
        return default
    return ref.removeprefix("sklearn:")


def features(name: str, seed: int) -> Split:
    """The features party's rows, scaled to [0, 1]."""
    x, _ = _load(name)
    train_idx, test_idx = _order(x.shape[0], seed)
    lo = x[train_idx].min(0).values
    span = (x[train_idx].max(0).values - lo).clamp(min=1e-9)
    scaled = ((x - lo) / span).clamp(0.0, 1.0)
    return Split(scaled[train_idx], scaled[test_idx])


def labels(name: str, seed: int) -> tuple[Split, int]:
    """The labels party's class indices and the number of classes."""
    x, y = _load(name)
    train_idx, test_idx = _order(x.shape[0], seed)
    return Split(y[train_idx], y[test_idx]), int(y.max().item()) + 1


def batches(n: int, batch_size: int, epoch: int, seed: int) -> list[torch.Tensor]:
    """Row indices of every full batch of an epoch (the last partial batch is dropped)."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100003 + epoch))
    return [perm[i : i + batch_size] for i in range(0, n - batch_size + 1, batch_size)]
