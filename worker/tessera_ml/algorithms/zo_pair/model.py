"""The network ``zo_pair`` trains, its per-input losses, evaluation and checksums."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


def build_mlp(num_features: int, hidden: list[int], num_outputs: int, *, seed: int) -> nn.Module:
    """Linear layers with ReLU between them, initialised from ``seed`` (same on every rank)."""
    torch.manual_seed(seed)
    widths = [num_features, *hidden, num_outputs]
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        if i:
            layers.append(nn.ReLU())
        layers.append(nn.Linear(a, b))
    return nn.Sequential(*layers)


def load_weights(model: nn.Module, ref: str, device: torch.device) -> None:
    """Weights from a state-dict file or a checkpoint folder holding ``rank-0.pt``."""
    path = Path(ref)
    if path.is_dir():
        path = path / "rank-0.pt"
    if not path.is_file():
        raise ValueError(f"init_checkpoint {ref!r}: no such file")
    state: Any = torch.load(path, map_location=device, weights_only=False)
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        state = state["model"]
    if not isinstance(state, dict):
        raise ValueError(f"init_checkpoint {ref!r} holds no state dict")
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise ValueError(f"init_checkpoint {ref!r} does not fit the model: {exc}") from exc


def per_input_loss(logits: torch.Tensor, target: torch.Tensor, num_inputs: int) -> torch.Tensor:
    """Mean loss of each input (a micro-batch) of a batch made of ``num_inputs`` equal inputs."""
    if target.dtype.is_floating_point:
        each = F.mse_loss(logits.squeeze(-1), target, reduction="none")
    else:
        each = F.cross_entropy(logits, target, reduction="none")
    return each.view(num_inputs, -1).mean(1)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """``eval_loss`` and, for classification, ``accuracy`` on a held-out set."""
    out = model(x)
    loss = float(per_input_loss(out, y, 1)[0])
    result = {"eval_loss": loss}
    if not y.dtype.is_floating_point:
        result["accuracy"] = float((out.argmax(1) == y).float().mean())
    return result


def checksum(model: nn.Module) -> str:
    """SHA-256 of every parameter's bytes, in order: equal only for bit-identical copies."""
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
