"""Party-local data for the features and labels parties, through ``tessera_ml.data.resolve``.

Both parties resolve the same reference, so they hold the same rows in the same order (the split
is fixed by the reference's ``split_seed``). Features are scaled to [0, 1] with training-set
minima and maxima, which keeps fixed-point products small and precise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from tessera_ml.data import parse_ref, resolve


@dataclass(frozen=True)
class Split:
    train: torch.Tensor
    test: torch.Tensor


def dataset_ref(slot_ref: str | None, default: str) -> str:
    """The party's own reference, else the job's; bare names mean the bundled sets."""
    ref = slot_ref or default
    return ref if ":" in ref else f"sklearn:{ref}"


def _unscaled(ref: str) -> str:
    parsed = parse_ref(ref)
    if parsed.option("standardize") is not None:
        return ref
    return f"{ref}{'&' if '?' in ref else '?'}standardize=0"


def features(ref: str, data_root: Path | None = None) -> Split:
    """The features party's rows, scaled to [0, 1]."""
    ds = resolve(_unscaled(ref), data_root)
    train, test = ds.train.x.to(torch.float64), ds.test.x.to(torch.float64)
    lo = train.min(0).values
    span = (train.max(0).values - lo).clamp(min=1e-9)
    return Split(((train - lo) / span).clamp(0, 1), ((test - lo) / span).clamp(0, 1))


def labels(ref: str, data_root: Path | None = None) -> tuple[Split, int]:
    """The labels party's class indices and the number of classes."""
    ds = resolve(_unscaled(ref), data_root)
    if ds.task != "classification" or ds.train.y is None or ds.test.y is None:
        raise ValueError(f"{ref} is not a multi-class classification set")
    return Split(ds.train.y.to(torch.int64), ds.test.y.to(torch.int64)), ds.num_classes


def batches(n: int, batch_size: int, epoch: int, seed: int) -> list[torch.Tensor]:
    """Row indices of every full batch of an epoch (the last partial batch is dropped)."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 100003 + epoch))
    return [perm[i : i + batch_size] for i in range(0, n - batch_size + 1, batch_size)]


def batches_per_epoch(n: int, batch_size: int) -> int:
    """The full batches of an epoch; an empty batch, or one larger than the rows, is refused."""
    if batch_size < 1:
        raise ValueError(f"a batch holds at least one row, not {batch_size}")
    if n // batch_size == 0:
        raise ValueError(f"batch_size {batch_size} exceeds the {n} training rows")
    return n // batch_size


def step_rows(n: int, batch_size: int, step: int, seed: int) -> torch.Tensor:
    """Row indices of a job's batch at ``step`` (counted from 0 over all epochs): epoch after
    epoch of ``batches``, as the compute parties train on them."""
    per_epoch = batches_per_epoch(n, batch_size)
    return batches(n, batch_size, step // per_epoch, seed)[step % per_epoch]
