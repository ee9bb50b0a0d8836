"""Evaluation metrics on tensors: accuracy, ROC AUC, log loss. Fractions in [0, 1]."""

from __future__ import annotations

import torch


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of rows whose arg-max class (or positive logit, for one column) matches."""
    if logits.dim() == 1 or logits.shape[-1] == 1:
        predicted = (logits.reshape(-1) > 0).to(labels.dtype)
        return float((predicted == labels.reshape(-1)).float().mean())
    return float((logits.argmax(-1) == labels).float().mean())


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve (Mann-Whitney, ties count one half); nan with one class."""
    scores = scores.reshape(-1).double()
    positive = labels.reshape(-1) > 0.5
    n_pos = int(positive.sum())
    n_neg = positive.numel() - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = _average_ranks(scores)
    rank_sum = float(ranks[positive].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def _average_ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks, tied values sharing their mean rank."""
    unique, inverse, counts = torch.unique(values, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    mean_rank = ends - (counts.double() - 1) / 2
    assert unique.numel() == counts.numel()
    return mean_rank[inverse]


def binary_log_loss(probabilities: torch.Tensor, labels: torch.Tensor) -> float:
    p = probabilities.reshape(-1).double().clamp(1e-12, 1 - 1e-12)
    y = labels.reshape(-1).double()
    return float(-(y * p.log() + (1 - y) * (1 - p).log()).mean())
