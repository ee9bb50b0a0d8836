"""scikit-learn's bundled datasets (no download) as tensors with a fixed split."""

from __future__ import annotations

import importlib

import numpy as np
import torch

from tessera_ml.data.tabular import Dataset, Table, Task, split_by_id, standardize

_LOADERS = {
    "digits": ("load_digits", "classification"),
    "breast_cancer": ("load_breast_cancer", "binary"),
    "wine": ("load_wine", "classification"),
    "diabetes": ("load_diabetes", "regression"),
}


def load_sklearn(
    name: str, *, test_fraction: float = 0.2, split_seed: int = 0, scale: bool = True
) -> Dataset:
    """``digits`` (8x8 images, 10 classes), ``breast_cancer`` (binary), ``wine`` (3 classes),
    ``diabetes`` (regression, target standardised). Features standardised on the train split."""
    if name not in _LOADERS:
        raise ValueError(f"no bundled set {name!r} (known: {', '.join(_LOADERS)})")
    loader, task = _LOADERS[name]
    bunch = getattr(importlib.import_module("sklearn.datasets"), loader)()
    x = torch.from_numpy(np.asarray(bunch.data, dtype=np.float32))
    target = np.asarray(bunch.target)
    y = _target(target, task)
    ids = torch.arange(x.shape[0], dtype=torch.int64)
    full = Table(x, y, ids)
    train_idx, test_idx = split_by_id(ids, test_fraction, split_seed)
    train, test = full.rows(train_idx), full.rows(test_idx)
    if scale:
        train, test = standardize(train, test)
    if task == "regression":
        assert train.y is not None and test.y is not None
        mean, std = train.y.mean(), train.y.std()
        train = Table(train.x, (train.y - mean) / std, train.ids)
        test = Table(test.x, (test.y - mean) / std, test.ids)
    names = getattr(bunch, "feature_names", None)
    columns = tuple(str(c) for c in names) if names is not None else ()
    if len(columns) != x.shape[1]:
        columns = tuple(f"f{i}" for i in range(x.shape[1]))
    return Dataset(
        name=f"sklearn:{name}",
        train=train,
        test=test,
        task=task,  # type: ignore[arg-type]
        columns=columns,
        num_classes=int(target.max()) + 1 if task != "regression" else 1,
        image_shape=(1, 8, 8) if name == "digits" else None,
    )


def _target(target: np.ndarray, task: Task | str) -> torch.Tensor:
    if task == "classification":
        return torch.from_numpy(target.astype(np.int64))
    return torch.from_numpy(target.astype(np.float32))
