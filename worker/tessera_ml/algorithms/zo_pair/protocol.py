"""One step of the pair protocol on one processor.

Processor ``2i`` evaluates its pair's two inputs at W + εz, processor ``2i+1`` the same two
inputs at W - εz, each in one forward pass without autograd. The two loss scalars of every
processor are all-gathered; each processor turns the N inputs' losses into gradient scalars
(L+ - L-)/2ε, regenerates z and applies the same SGD step, so every copy stays bit-identical.
With two processors the all-gather is one exchange, which a ``Peer`` (a direct link between the
two) makes without the communicator's network thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from tessera_ml.algorithms.zo_pair.model import per_input_loss
from tessera_ml.algorithms.zo_pair.perturb import (
    Distribution,
    PerturbedForward,
    ZSource,
    apply_update,
    unique_parameters,
)
from tessera_ml.algorithms.zo_pair.seeds import direction_seed
from tessera_ml.comm.base import Communicator, Group
from tessera_ml.comm.peer import CommPeer, Peer
from tessera_ml.data.tabular import Task

INPUTS_PER_PROCESSOR = 2


@dataclass(frozen=True)
class StepResult:
    loss: float
    """Mean over the step's N inputs of (L+ + L-)/2."""
    grad_scalars: torch.Tensor
    """(L+ - L-)/2ε of every input, float64, ``[pairs, 2]``."""
    lr: float


@dataclass(frozen=True)
class Schedule:
    lr: float
    steps: int
    kind: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = 0

    def at(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if self.kind == "constant":
            return self.lr
        span = max(self.steps - self.warmup_steps, 1)
        done = min(max(step - self.warmup_steps, 0) / span, 1.0)
        if self.kind == "linear":
            return self.lr * (1.0 - done)
        return self.lr * 0.5 * (1.0 + math.cos(math.pi * done))


class PairProcessor:
    """The model copy of one processor and the step it takes with its peers."""

    def __init__(
        self,
        model: nn.Module,
        comm: Communicator,
        *,
        role_rank: int,
        num_processors: int,
        job_seed: int,
        epsilon: float,
        schedule: Schedule,
        directions: Literal["shared", "per_pair"] = "shared",
        perturbation: Distribution = "rademacher",
        weight_decay: float = 0.0,
        task: Task = "classification",
        group: Group | None = None,
        peer: Peer | None = None,
    ) -> None:
        if num_processors < 2 or num_processors % 2:
            raise ValueError(f"need an even number of processors, got {num_processors}")
        if peer is not None and num_processors != 2:
            raise ValueError(f"a peer exchanges two processors' losses, not {num_processors}")
        self.model = model
        self.comm = comm
        self.group = group
        self.peer = peer
        self.role_rank = role_rank
        self.pair = role_rank // 2
        self.sign = 1.0 if role_rank % 2 == 0 else -1.0
        self.num_pairs = num_processors // 2
        self.job_seed = job_seed
        self.epsilon = epsilon
        self.schedule = schedule
        self.directions = directions
        self.weight_decay = weight_decay
        self.task: Task = task
        self.source = ZSource(unique_parameters(model), perturbation)
        self.forward = PerturbedForward(model, self.source)

    def seed_of_pair(self, step: int, pair: int) -> int:
        direction = 0 if self.directions == "shared" else pair + 1
        return direction_seed(self.job_seed, step, direction)

    def local_losses(self, step: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """This processor's side of its pair: the two inputs' losses in one forward pass."""
        num_inputs = x.shape[0]
        seed = self.seed_of_pair(step, self.pair)
        with self.forward.at(seed, self.sign * self.epsilon) as perturbed:
            out = perturbed(x.flatten(0, 1))
            return per_input_loss(out, y.flatten(0, 1), self.task, num_inputs).float()

    def gather(self, losses: torch.Tensor) -> list[torch.Tensor]:
        """Every processor's losses, in role-rank order."""
        if self.peer is None:
            return self.comm.all_gather(losses, self.group)
        mine = losses.cpu()
        theirs = self.peer.exchange(mine)[0]
        return [mine, theirs] if self.role_rank == 0 else [theirs, mine]

    @property
    def bytes_sent(self) -> int:
        """What this processor sent: the communicator counts its direct link's messages too."""
        return self.comm.stats.sent

    @property
    def bytes_received(self) -> int:
        return self.comm.stats.received

    @property
    def link_bytes_sent(self) -> int:
        """What went over the direct link (0 without one)."""
        if self.peer is None or isinstance(self.peer, CommPeer):
            return 0  # a CommPeer's messages are the communicator's, counted there
        return self.peer.stats.bytes_sent

    def step(self, step: int, x: torch.Tensor, y: torch.Tensor) -> StepResult:
        """``x``: the pair's inputs ``[2, micro_batch, features]``, ``y`` their targets."""
        losses = self.local_losses(step, x, y)
        rows = torch.stack(self.gather(losses)).double().cpu()
        plus, minus = rows[0::2], rows[1::2]
        grads = (plus - minus) / (2.0 * self.epsilon)
        lr = self.schedule.at(step)
        if self.directions == "shared":
            terms = [(self.seed_of_pair(step, 0), float(grads.mean()))]
        else:
            per_pair = grads.mean(1) / self.num_pairs
            terms = [(self.seed_of_pair(step, i), float(c)) for i, c in enumerate(per_pair)]
        apply_update(self.source, terms, lr, self.weight_decay)
        return StepResult(float((plus + minus).mean() / 2.0), grads, lr)
