"""The dense part of the click model: an MLP over the concatenated embeddings of a sample."""

from __future__ import annotations

import torch
from torch import nn


def dense_tower(num_fields: int, dim: int, hidden: list[int], seed: int) -> nn.Module:
    """MLP ``fields*dim -> hidden... -> 1 logit``, initialised from ``seed``."""
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    width = num_fields * dim
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, 1))
    model = nn.Sequential(*layers)
    torch.random.set_rng_state(gen_state)
    return model


def forward(model: nn.Module, embeddings: torch.Tensor) -> torch.Tensor:
    """Logits [batch] from embeddings [batch, fields, dim]."""
    out: torch.Tensor = model(embeddings.flatten(1)).squeeze(1)
    return out
