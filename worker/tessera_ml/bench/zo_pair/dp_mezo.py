"""Data-parallel MeZO: the baseline that splits MeZO's batch over processes instead of pairing.

Every process holds the whole model and derives the same z from the shared seed. Each takes its
share of the step's inputs and runs MeZO's step on it (in place: +εz, evaluate, -2εz,
evaluate, +εz to restore), then one float64 scalar, the sum of its projected gradients
(L+ - L-)/2ε, is all-reduced (between two processes given a ``Peer``, as ``zo_pair``'s losses
are, by one exchange over it); every process divides by the number of inputs and regenerates z
for the same update. Per process and step: four generations of z and two forward passes over
its share, against ``zo_pair``'s two generations and one forward pass over a pair's inputs.
"""

from __future__ import annotations

import torch
from torch import nn

from tessera_ml.algorithms.zo_pair.perturb import Distribution
from tessera_ml.bench.zo_pair.mezo import MezoStep
from tessera_ml.comm.base import Communicator, Group
from tessera_ml.comm.peer import Peer
from tessera_ml.data.tabular import Task


class DataParallelMezo(MezoStep):
    def __init__(
        self,
        model: nn.Module,
        comm: Communicator,
        *,
        epsilon: float,
        lr: float,
        task: Task,
        distribution: Distribution,
        group: Group | None = None,
        peer: Peer | None = None,
    ) -> None:
        super().__init__(model, epsilon=epsilon, lr=lr, task=task, distribution=distribution)
        self.comm, self.group, self.peer = comm, group, peer
        self.size = group.size if group is not None else comm.world_size
        if peer is not None and self.size != 2:
            raise ValueError(f"a peer sums two processes' scalars, not {self.size}")
        self.index = group.index(comm.rank) if group is not None else comm.rank

    def share(self, x: torch.Tensor) -> torch.Tensor:
        """This process's inputs of a step's ``[N, micro_batch, ...]``: N / size of them."""
        if x.shape[0] % self.size:
            raise ValueError(f"{x.shape[0]} inputs do not split over {self.size} processes")
        per = x.shape[0] // self.size
        return x[self.index * per : (self.index + 1) * per]

    def step(self, seed: int, x: torch.Tensor, y: torch.Tensor) -> float:
        """One step over the whole step's inputs ``x`` ``[N, micro_batch, ...]`` (every
        process passes the same; each evaluates its share). Returns the gradient scalar."""
        projected = self.projected(seed, self.share(x), self.share(y)).sum().reshape(1)
        if self.peer is not None:
            projected = projected + self.peer.exchange(projected)[0]  # a + b == b + a, exactly
        else:
            self.comm.all_reduce(projected, "sum", self.group)
        g = float(projected[0]) / x.shape[0]
        self.update(seed, g)
        return g
