"""The data and model of one device, chosen exactly as ``ddp`` chooses them.

The same reference, shard and per-step rows as a ``ddp`` job with the same seed and world, so
the two runs can be compared parameter for parameter.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from tessera_ml.algorithms.hier_sync.spec import HierSyncConfig
from tessera_ml.algorithms.hier_sync.topology import ROLE
from tessera_ml.context import RankContext
from tessera_ml.data.tabular import Dataset
from tessera_ml.models.zoo import build_model, seeded
from tessera_ml.training import pieces
from tessera_ml.training.pieces import batch_indices


def rank_dataset(ctx: RankContext, config: HierSyncConfig) -> Dataset:
    return pieces.rank_dataset(ctx, config, ROLE)


def rank_model(config: HierSyncConfig, data: Dataset, device: torch.device) -> nn.Module:
    return seeded(config.seed, lambda: build_model(config.model, dataset=data)).to(device)


def batch(
    data: Dataset, config: HierSyncConfig, role_rank: int, step: int
) -> tuple[torch.Tensor, torch.Tensor]:
    train = data.train
    rows = batch_indices(len(train), config.batch_size, config.seed, role_rank, step)
    return train.x[rows], cast(torch.Tensor, train.y)[rows]
