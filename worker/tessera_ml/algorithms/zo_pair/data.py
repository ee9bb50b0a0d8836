"""The inputs of a pair: its shard of the dataset, read two micro-batches per step.

Each pair reads its own stream of inputs (two micro-batches per step) in an order derived from
the job seed, the pair index and the epoch, so both processors of a pair read the same inputs
without exchanging anything.
"""

from __future__ import annotations

import torch

from tessera_ml.algorithms.zo_pair.seeds import data_seed
from tessera_ml.context import RankContext
from tessera_ml.data.partition import shard_dataset
from tessera_ml.data.resolver import resolve
from tessera_ml.data.tabular import Dataset


def pair_dataset(ctx: RankContext, default_ref: str) -> Dataset:
    """This pair's shard of the training rows of the dataset its processors name.

    Pairs naming the same reference (an assignment's own, else the job's) split its training
    rows between them, by row, in pair order; every pair keeps the whole test split.
    """
    processors = [s for s in ctx.plan if s.role == ctx.slot.role]
    processors.sort(key=lambda s: s.role_rank)
    firsts = processors[::2]
    ref = ctx.slot.dataset or default_ref
    sharing = [p for p in firsts if (p.dataset or default_ref) == ref]
    index = next(i for i, p in enumerate(sharing) if p.role_rank == ctx.slot.role_rank // 2 * 2)
    return shard_dataset(resolve(ref, ctx.data_root), index, len(sharing))


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
