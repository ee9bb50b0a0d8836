"""Optimizers for rows stored apart from each other: state lives beside each row.

Each optimizer updates a batch of full rows ``[n, dim + slots]`` gathered from a table, given the
summed gradient of each row; rows not in the batch are never read or written. Adam keeps a step
count per row (a row's bias correction counts only the steps that touched it), which is what a
dense ``torch.optim.Adam`` does for parameters whose ``grad`` is ``None`` on a step.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

OptimizerName = Literal["sgd", "adagrad", "adam"]


class SparseOptimizer:
    name: str = ""

    def slots(self, dim: int) -> int:
        """Optimizer state floats stored per row."""
        raise NotImplementedError

    def update(self, rows: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        """New values of ``rows`` [n, dim + slots] after one step with ``grad`` [n, dim]."""
        raise NotImplementedError


class SparseSGD(SparseOptimizer):
    name = "sgd"

    def __init__(self, lr: float) -> None:
        self.lr = lr

    def slots(self, dim: int) -> int:
        return 0

    def update(self, rows: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        dim = grad.shape[1]
        rows[:, :dim].add_(grad, alpha=-self.lr)
        return rows


class SparseAdagrad(SparseOptimizer):
    """``torch.optim.Adagrad`` (no decay, zero initial accumulator) per row."""

    name = "adagrad"

    def __init__(self, lr: float, eps: float = 1e-10) -> None:
        self.lr = lr
        self.eps = eps

    def slots(self, dim: int) -> int:
        return dim

    def update(self, rows: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        dim = grad.shape[1]
        param, state_sum = rows[:, :dim], rows[:, dim : 2 * dim]
        state_sum.addcmul_(grad, grad, value=1)
        std = state_sum.sqrt().add_(self.eps)
        param.addcdiv_(grad, std, value=-self.lr)
        return rows


class SparseAdam(SparseOptimizer):
    """``torch.optim.Adam`` per row, with the row's own step count stored as its last slot."""

    name = "adam"

    def __init__(
        self, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        self.lr = lr
        self.beta1, self.beta2 = betas
        self.eps = eps

    def slots(self, dim: int) -> int:
        return 2 * dim + 1

    def update(self, rows: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        dim = grad.shape[1]
        param = rows[:, :dim]
        exp_avg, exp_avg_sq = rows[:, dim : 2 * dim], rows[:, 2 * dim : 3 * dim]
        step = rows[:, 3 * dim].add_(1).to(torch.float64)
        exp_avg.lerp_(grad, 1 - self.beta1)
        exp_avg_sq.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
        bias_correction1 = 1 - torch.pow(self.beta1, step)
        bias_correction2_sqrt = torch.sqrt(1 - torch.pow(self.beta2, step))
        step_size = (self.lr / bias_correction1).to(torch.float32).unsqueeze(1)
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt.to(torch.float32).unsqueeze(1)).add_(
            self.eps
        )
        param.sub_(step_size * (exp_avg / denom))
        return rows


def make_optimizer(name: str, lr: float) -> SparseOptimizer:
    if not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"learning rate must be positive, got {lr}")
    if name == "sgd":
        return SparseSGD(lr)
    if name == "adagrad":
        return SparseAdagrad(lr)
    if name == "adam":
        return SparseAdam(lr)
    raise ValueError(f"unknown sparse optimizer {name!r} (sgd, adagrad, adam)")
