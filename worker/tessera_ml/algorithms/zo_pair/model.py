"""The network ``zo_pair`` trains: built from the model zoo, its per-input losses, checksums."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from tessera_ml.data.tabular import Dataset, Task
from tessera_ml.errors import CodedError
from tessera_ml.host_paths import host_path
from tessera_ml.metrics import accuracy, auc
from tessera_ml.models.zoo import build_model, seeded
from tessera_ml.safe_load import load_state


def make_model(spec: Any, data: Dataset, *, seed: int) -> nn.Module:
    """The model a spec describes, initialised from ``seed`` (the same on every rank).

    It stays in eval mode: both sides of a pair must evaluate the same deterministic function
    (no dropout masks, no batch-norm statistics drifting apart between copies).
    """
    return seeded(seed, lambda: build_model(spec, dataset=data)).eval()


def load_weights(
    model: nn.Module, ref: str, device: torch.device, roots: Sequence[Path] = ()
) -> None:
    """Weights from a state-dict file or a checkpoint folder holding ``rank-0.pt``. With
    ``roots`` (on a worker) the path must lie inside one of them (``tessera_ml.host_paths``).
    The file is read with torch's restricted unpickler: tensors and plain containers only, so
    a file that holds anything else is refused rather than run."""
    path = host_path(ref, roots, "init_checkpoint")
    if path.is_dir():
        path = path / "rank-0.pt"
    if not path.is_file():
        raise CodedError("no_such_file", f"init_checkpoint {ref!r}: no such file")
    state: Any = load_state(path, device, f"init_checkpoint {ref!r}")
    if isinstance(state, dict) and isinstance(state.get("model"), dict):
        state = state["model"]
    if not isinstance(state, dict):
        raise CodedError("no_state_dict", f"init_checkpoint {ref!r} holds no state dict")
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise CodedError(
            "checkpoint_mismatch", f"init_checkpoint {ref!r} does not fit the model: {exc}"
        ) from exc


def example_losses(out: torch.Tensor, target: torch.Tensor, task: Task) -> torch.Tensor:
    """The loss of every example: cross-entropy, logistic or squared error."""
    if task == "classification":
        return F.cross_entropy(out, target, reduction="none")
    if task == "binary":
        return F.binary_cross_entropy_with_logits(
            out.reshape(-1), target.reshape(-1).float(), reduction="none"
        )
    return F.mse_loss(out.reshape(-1), target.reshape(-1).float(), reduction="none")


def per_input_loss(
    out: torch.Tensor, target: torch.Tensor, task: Task, num_inputs: int
) -> torch.Tensor:
    """Mean loss of each input (a micro-batch) of a batch made of ``num_inputs`` equal inputs."""
    return example_losses(out, target, task).view(num_inputs, -1).mean(1)


@torch.no_grad()
def evaluate(model: nn.Module, data: Dataset, device: torch.device) -> dict[str, float]:
    """Test-split ``eval_loss``, plus ``accuracy`` (and ``auc`` if binary) unless regression."""
    test = data.test
    if test.y is None:
        return {}
    out = model(test.x.to(device)).cpu()
    result = {"eval_loss": float(example_losses(out, test.y, data.task).mean())}
    if data.task != "regression":
        result["accuracy"] = accuracy(out, test.y)
    if data.task == "binary":
        result["auc"] = auc(out, test.y)
    return result


def checksum(model: nn.Module) -> str:
    """SHA-256 of every parameter's bytes, in order: equal only for bit-identical copies."""
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
