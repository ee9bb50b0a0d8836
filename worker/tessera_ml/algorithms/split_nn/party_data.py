"""A party's local share of a vertically split dataset: ids plus its columns or its labels.

References follow the library's syntax, ``sklearn:NAME?columns=A:B&test=0.2&split_seed=0``.
A feature party keeps its ``columns`` and never its labels; the label party keeps the labels
and no columns. The per-assignment option ``keep`` (fraction of rows, seeded by the party name)
makes parties hold different, overlapping sample sets, as real vertically split parties do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl

import numpy as np
import torch
from sklearn import datasets as skd

Task = Literal["classification", "binary", "regression"]

_LOADERS: dict[str, tuple[Any, Task]] = {
    "digits": (skd.load_digits, "classification"),
    "breast_cancer": (skd.load_breast_cancer, "binary"),
    "wine": (skd.load_wine, "classification"),
    "diabetes": (skd.load_diabetes, "regression"),
}


@dataclass(frozen=True)
class Rows:
    """Rows of one split as this party sees them: ids, and features or labels (never both)."""

    ids: np.ndarray
    x: torch.Tensor | None
    y: torch.Tensor | None

    def take(self, positions: torch.Tensor) -> Rows:
        idx = positions.numpy()
        return Rows(
            self.ids[idx],
            None if self.x is None else self.x[positions],
            None if self.y is None else self.y[positions],
        )


@dataclass(frozen=True)
class PartyData:
    train: Rows
    test: Rows
    task: Task
    num_classes: int

    @property
    def num_features(self) -> int:
        assert self.train.x is not None
        return int(self.train.x.shape[1])

    @property
    def num_outputs(self) -> int:
        return self.num_classes if self.task == "classification" else 1


@dataclass(frozen=True)
class Joined:
    """The whole dataset in one place: only for the centralised reference and benchmarks."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    ids_train: np.ndarray
    x_test: torch.Tensor
    y_test: torch.Tensor
    ids_test: np.ndarray
    task: Task
    num_classes: int


def parse(ref: str) -> tuple[str, dict[str, str]]:
    scheme, sep, rest = ref.partition(":")
    name, _, query = rest.partition("?")
    if scheme != "sklearn" or not sep or name not in _LOADERS:
        known = ", ".join(f"sklearn:{n}" for n in _LOADERS)
        raise ValueError(f"split_nn: unknown dataset reference {ref!r} (known: {known})")
    return name, dict(parse_qsl(query))


def load_joined(ref: str) -> Joined:
    """All columns and labels of a bundled set, standardised on the train split."""
    name, opts = parse(ref)
    loader, task = _LOADERS[name]
    bunch = loader()
    x = torch.from_numpy(np.asarray(bunch.data, dtype=np.float64))
    target = np.asarray(bunch.target)
    if task == "classification":
        y = torch.from_numpy(target.astype(np.int64))
    else:
        y = torch.from_numpy(target.astype(np.float64))
    n = x.shape[0]
    order = torch.randperm(
        n, generator=torch.Generator().manual_seed(int(opts.get("split_seed", 0)))
    )
    n_test = max(1, round(n * float(opts.get("test", 0.2))))
    test_idx, train_idx = order[:n_test].sort().values, order[n_test:].sort().values
    mean = x[train_idx].mean(0, keepdim=True)
    std = x[train_idx].std(0, keepdim=True)
    std = torch.where(std > 1e-6, std, torch.ones_like(std))
    x = (x - mean) / std
    if task == "regression":
        y = (y - y[train_idx].mean()) / y[train_idx].std()
    ids = np.array([f"s{i:06d}" for i in range(n)])
    cols = _columns(opts.get("columns"), x.shape[1])
    return Joined(
        x[train_idx][:, cols],
        y[train_idx],
        ids[train_idx.numpy()],
        x[test_idx][:, cols],
        y[test_idx],
        ids[test_idx.numpy()],
        task,
        int(target.max()) + 1 if task == "classification" else 1,
    )


def load_party(ref: str, role: str, party: str, options: dict[str, Any]) -> PartyData:
    """This party's share: columns for ``feature``, labels for ``label``."""
    joined = load_joined(ref)
    keep = float(options.get("keep", 1.0))
    if not 0.0 < keep <= 1.0:
        raise ValueError(f"split_nn: option keep must be in (0, 1], got {keep}")
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(party.encode()).digest()[:8]))

    def share(x: torch.Tensor, y: torch.Tensor, ids: np.ndarray) -> Rows:
        rows = np.sort(rng.permutation(len(ids))[: max(1, round(len(ids) * keep))])
        if keep < 1.0:
            rng.shuffle(rows)
        pos = torch.from_numpy(rows)
        if role == "label":
            return Rows(ids[rows], None, y[pos])
        return Rows(ids[rows], x[pos], None)

    return PartyData(
        share(joined.x_train, joined.y_train, joined.ids_train),
        share(joined.x_test, joined.y_test, joined.ids_test),
        joined.task,
        joined.num_classes,
    )


def _columns(spec: str | None, total: int) -> list[int]:
    if spec is None:
        return list(range(total))
    if ":" in spec:
        lo, _, hi = spec.partition(":")
        start, stop = int(lo or 0), int(hi or total)
        if not 0 <= start < stop <= total:
            raise ValueError(f"split_nn: columns {spec!r} out of range 0:{total}")
        return list(range(start, stop))
    cols = [int(c) for c in spec.split(",")]
    if any(not 0 <= c < total for c in cols):
        raise ValueError(f"split_nn: columns {spec!r} out of range 0:{total}")
    return cols
