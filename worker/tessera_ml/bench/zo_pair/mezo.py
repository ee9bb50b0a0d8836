"""The single-process MeZO step the benchmark compares against.

MeZO perturbs the weights in place: +εz, evaluate, -2εz, evaluate, +εz to restore, then
regenerates z once more for the update: four generations of z and two forward passes over all
N inputs on one process, against two generations and one forward pass per ``zo_pair`` processor.
"""

from __future__ import annotations

import torch
from torch import nn

from tessera_ml.algorithms.zo_pair.model import per_input_loss
from tessera_ml.algorithms.zo_pair.perturb import Distribution, ZSource, unique_parameters
from tessera_ml.data.tabular import Task


class MezoStep:
    def __init__(
        self,
        model: nn.Module,
        *,
        epsilon: float,
        lr: float,
        task: Task,
        distribution: Distribution = "gaussian",
    ) -> None:
        self.model = model.eval()
        self.source = ZSource(unique_parameters(model), distribution)
        self.epsilon, self.lr, self.task = epsilon, lr, task

    @torch.no_grad()
    def _perturb(self, seed: int, scale: float) -> None:
        for i, p in enumerate(self.source.params):
            self.source.add_to(p.data, seed, i, alpha=scale)

    @torch.no_grad()
    def _losses(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = self.model(x.flatten(0, 1))
        return per_input_loss(out, y.flatten(0, 1), self.task, x.shape[0]).double()

    def projected(self, seed: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Each input's (L+ - L-) / 2ε for z of ``seed``; the weights are restored after."""
        eps = self.epsilon
        self._perturb(seed, eps)
        plus = self._losses(x, y)
        self._perturb(seed, -2 * eps)
        minus = self._losses(x, y)
        self._perturb(seed, eps)
        return (plus - minus) / (2 * eps)

    def update(self, seed: int, g: float) -> None:
        self._perturb(seed, -self.lr * g)

    def step(self, seed: int, x: torch.Tensor, y: torch.Tensor) -> float:
        """One step over inputs ``x`` ``[N, micro_batch, ...]``; returns the gradient scalar."""
        g = float(self.projected(seed, x, y).mean())
        self.update(seed, g)
        return g
