"""The three ordinary models, built reproducibly, and what the label party computes with them.

Every model is initialised under its own seed derived from the job seed and its place in the
network, so the distributed run and the centralised reference start from identical weights.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from tessera_ml.algorithms.split_nn.spec import ModelSpec, SplitNNConfig
from tessera_ml.data.tabular import Task
from tessera_ml.models import zoo
from tessera_ml.models.spec import CustomSpec, MLPSpec

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def derived_seed(seed: int, *parts: object) -> int:
    text = ":".join(str(p) for p in (seed, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "big")


def _mlp(spec: ModelSpec, in_features: int, out: int, final_activation: bool) -> nn.Module:
    layers = zoo.mlp(MLPSpec(hidden=spec.hidden, activation=spec.activation), in_features, out)
    if final_activation:
        layers.append(nn.ReLU() if spec.activation == "relu" else nn.Tanh())
    return layers


def _custom(spec: ModelSpec, in_features: int, out: int | None) -> nn.Module:
    assert spec.factory is not None
    return zoo.custom_model(CustomSpec(target=spec.factory, kwargs=spec.kwargs), in_features, out)


def build_model(
    spec: ModelSpec,
    in_features: int,
    *,
    out: int | None,
    final_activation: bool,
    seed: int,
    dtype: torch.dtype,
) -> nn.Module:
    def build() -> nn.Module:
        if spec.kind == "custom":
            return _custom(spec, in_features, out)
        width = out if out is not None else spec.out
        assert width is not None
        return _mlp(spec, in_features, width, final_activation)

    return zoo.seeded(seed, build, restore=True).to(dtype)


def output_width(
    model: nn.Module, in_features: int, dtype: torch.dtype, device: torch.device | None = None
) -> int:
    """Width of the model's output, found by a forward pass on one zero row."""
    was_training = model.training
    model.eval()
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        width = int(model(torch.zeros(1, in_features, dtype=dtype, device=device)).shape[1])
    model.train(was_training)
    return width


def bottom_model(cfg: SplitNNConfig, index: int, in_features: int) -> nn.Module:
    return build_model(
        cfg.bottom,
        in_features,
        out=None,
        final_activation=True,
        seed=derived_seed(cfg.seed, "bottom", index),
        dtype=DTYPES[cfg.dtype],
    )


def middle_model(cfg: SplitNNConfig, in_features: int) -> nn.Module:
    return build_model(
        cfg.middle,
        in_features,
        out=None,
        final_activation=True,
        seed=derived_seed(cfg.seed, "middle"),
        dtype=DTYPES[cfg.dtype],
    )


def top_model(cfg: SplitNNConfig, in_features: int, num_outputs: int) -> nn.Module:
    return build_model(
        cfg.top,
        in_features,
        out=num_outputs if cfg.top.kind == "mlp" else None,
        final_activation=False,
        seed=derived_seed(cfg.seed, "top"),
        dtype=DTYPES[cfg.dtype],
    )


def combine(parts: Sequence[torch.Tensor], how: str) -> torch.Tensor:
    """Join the feature parties' bottom outputs, in feature-role order."""
    if len(parts) == 1:
        return parts[0]
    if how == "concat":
        return torch.cat(list(parts), dim=1)
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total / len(parts) if how == "mean" else total


def combined_width(widths: Sequence[int], how: str) -> int:
    if how == "concat":
        return sum(widths)
    if len(set(widths)) != 1:
        raise ValueError(f"combine={how} needs equal bottom output widths, got {list(widths)}")
    return widths[0]


def loss_sum(logits: torch.Tensor, y: torch.Tensor, task: Task) -> torch.Tensor:
    """Summed loss over the rows; the training loss of a batch is this over the batch size."""
    if task == "classification":
        return F.cross_entropy(logits, y, reduction="sum")
    if task == "binary":
        return F.binary_cross_entropy_with_logits(logits[:, 0], y.to(logits.dtype), reduction="sum")
    return F.mse_loss(logits[:, 0], y.to(logits.dtype), reduction="sum")
