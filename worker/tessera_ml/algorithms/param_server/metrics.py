"""Evaluation metrics computed with torch alone."""

from __future__ import annotations

import torch


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties counted half); NaN with one class only."""
    positives = labels > 0.5
    n_pos = int(positives.sum())
    n_neg = labels.numel() - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    _, inverse, counts = torch.unique(
        scores.to(torch.float64), return_inverse=True, return_counts=True
    )
    # average 1-based rank of each distinct score
    ends = torch.cumsum(counts, 0).to(torch.float64)
    mean_rank = ends - (counts.to(torch.float64) - 1) / 2
    rank_sum = float(mean_rank[inverse][positives].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
