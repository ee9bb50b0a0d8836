"""Which aligned rows each step uses: every party computes the same schedule from the seed."""

from __future__ import annotations

import torch

from tessera_ml.algorithms.split_nn.models import derived_seed


def batches_per_epoch(num_rows: int, batch_size: int) -> int:
    if num_rows < batch_size:
        raise ValueError(
            f"split_nn: {num_rows} aligned training rows, fewer than one batch of {batch_size}"
        )
    return num_rows // batch_size


def batch_rows(step: int, num_rows: int, batch_size: int, seed: int) -> torch.Tensor:
    """Positions (into the aligned train rows) of the batch of ``step``; partial batches dropped."""
    per_epoch = batches_per_epoch(num_rows, batch_size)
    epoch, index = divmod(step, per_epoch)
    gen = torch.Generator().manual_seed(derived_seed(seed, "epoch", epoch))
    order = torch.randperm(num_rows, generator=gen)
    return order[index * batch_size : (index + 1) * batch_size]


def split_sizes(rows: int, parts: int) -> list[int]:
    """Sizes of ``parts`` near-equal consecutive chunks of ``rows`` (the micro-batches)."""
    base, extra = divmod(rows, parts)
    return [base + (1 if i < extra else 0) for i in range(parts) if base + (1 if i < extra else 0)]


def chunk_sizes(rows: int, chunk: int) -> list[int]:
    """Consecutive chunks of at most ``chunk`` rows (evaluation and prediction)."""
    return [min(chunk, rows - start) for start in range(0, rows, chunk)]
