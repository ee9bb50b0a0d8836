"""The dense part of the click model: an MLP over the concatenated embeddings of a sample."""

from __future__ import annotations

import torch
from torch import nn

from tessera_ml.models.zoo import seeded


def dense_tower(num_fields: int, dim: int, hidden: list[int], seed: int) -> nn.Module:
    """MLP ``fields*dim -> hidden... -> 1 logit``, initialised from ``seed``."""

    def build() -> nn.Module:
        layers: list[nn.Module] = []
        width = num_fields * dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        return nn.Sequential(*layers)

    return seeded(seed, build, restore=True)


def forward(model: nn.Module, embeddings: torch.Tensor, interactions: bool) -> torch.Tensor:
    """Logits [batch] from embeddings [batch, fields, dim].

    With ``interactions`` the logit adds every pairwise dot product of the fields' embeddings
    (a factorisation machine beside the MLP), computed as ((sum e)^2 - sum e^2) / 2.
    """
    out: torch.Tensor = model(embeddings.flatten(1)).squeeze(1)
    if interactions:
        total = embeddings.sum(dim=1)
        out = out + 0.5 * (total.pow(2).sum(dim=1) - embeddings.pow(2).sum(dim=(1, 2)))
    return out
