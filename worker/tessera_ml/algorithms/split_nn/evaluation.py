"""Evaluation metrics, computed at the label party from the logits and its own labels."""

from __future__ import annotations

import torch
from sklearn.metrics import roc_auc_score

from tessera_ml.algorithms.split_nn.models import loss_sum
from tessera_ml.data.tabular import Task


def metrics(logits: torch.Tensor, y: torch.Tensor, task: Task) -> dict[str, float]:
    """``eval_loss`` always; ``accuracy`` for classification; ``auc`` too for binary tasks."""
    n = max(1, y.shape[0])
    out = {"eval_loss": float(loss_sum(logits, y, task)) / n}
    if task == "classification":
        out["accuracy"] = float((logits.argmax(dim=1) == y).double().mean())
    elif task == "binary":
        scores = logits[:, 0].double()
        out["accuracy"] = float(((scores > 0).double() == y.double()).double().mean())
        if 0 < int(y.sum()) < y.shape[0]:
            out["auc"] = float(roc_auc_score(y.numpy(), scores.numpy()))
    return out
