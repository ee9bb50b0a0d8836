"""The data and model of one device, chosen exactly as ``ddp`` chooses them.

The same reference, shard and per-step rows as a ``ddp`` job with the same seed and world, so
the two runs can be compared parameter for parameter.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from tessera_ml.algorithms.ddp.train import batch_indices
from tessera_ml.algorithms.hier_sync.spec import HierSyncConfig
from tessera_ml.algorithms.hier_sync.topology import ROLE
from tessera_ml.context import RankContext
from tessera_ml.data.partition import shard_dataset
from tessera_ml.data.resolver import resolve
from tessera_ml.data.tabular import Dataset
from tessera_ml.models.zoo import build_model, seeded


def rank_dataset(ctx: RankContext, config: HierSyncConfig) -> Dataset:
    """A party's own dataset is sharded over its devices; the job's over all devices."""
    if ctx.slot.dataset:
        own = [s for s in ctx.plan if s.assignment_index == ctx.slot.assignment_index]
        return shard_dataset(
            resolve(ctx.slot.dataset, ctx.data_root), ctx.slot.local_index, len(own)
        )
    devices = ctx.ranks_of(ROLE)
    return shard_dataset(resolve(config.dataset, ctx.data_root), ctx.slot.role_rank, len(devices))


def rank_model(config: HierSyncConfig, data: Dataset, device: torch.device) -> nn.Module:
    return seeded(config.seed, lambda: build_model(config.model, dataset=data)).to(device)


def batch(
    data: Dataset, config: HierSyncConfig, role_rank: int, step: int
) -> tuple[torch.Tensor, torch.Tensor]:
    train = data.train
    rows = batch_indices(len(train), config.batch_size, config.seed, role_rank, step)
    return train.x[rows], cast(torch.Tensor, train.y)[rows]
