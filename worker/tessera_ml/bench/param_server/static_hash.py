"""The end-to-end baseline without dynamic tables: a static hashed ``nn.EmbeddingBag``.

What a PyTorch user runs when the id space is not known in advance: one fixed table of ``rows``
rows, each id's row ``hash(id) mod rows`` (colliding ids share a row), replicated on every
worker and trained data-parallel with sparse gradients (``sparse=True``), as
``DistributedDataParallel`` trains such a table: per step the workers exchange the rows their
batch touched and the summed gradient of each, and apply the average with torch's sparse
optimizer (``Adagrad`` and ``SGD`` take sparse gradients, ``SparseAdam`` stands in for Adam).
The dense tower, its Adam, the initial values' law, the batches and the test rows are the
parameter server's (``tessera_ml.algorithms.param_server``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tessera_ml.algorithms.param_server.data import Source, open_source
from tessera_ml.algorithms.param_server.hashing import init_rows
from tessera_ml.algorithms.param_server.metrics import auc
from tessera_ml.algorithms.param_server.model import dense_tower, forward
from tessera_ml.algorithms.param_server.spec import ParamServerConfig
from tessera_ml.comm.base import Communicator, Group
from tessera_ml.hashing import salted, shr
from tessera_ml.worlds import run_world

ROW_SALT = 0x57A71C


def hashed_rows(keys: torch.Tensor, rows: int) -> torch.Tensor:
    """Row of each int64 key: a 64-bit mix of the key, as a non-negative number, mod ``rows``."""
    return shr(salted(keys, ROW_SALT), 1) % rows


def floats_per_row(dim: int, optimizer: str) -> int:
    """Parameters plus the optimizer state torch keeps for each row of the table."""
    return dim * {"sgd": 1, "adagrad": 2, "adam": 3}[optimizer]


def equal_memory_rows(table_bytes: int, dim: int, optimizer: str) -> int:
    """Rows of a static table whose parameters and optimizer state take ``table_bytes``."""
    return max(1, table_bytes // (4 * floats_per_row(dim, optimizer)))


class StaticHashModel(nn.Module):
    """``EmbeddingBag(rows, dim, mode="sum", sparse=True)`` (one id per bag) + the dense tower."""

    def __init__(self, rows: int, num_fields: int, config: ParamServerConfig) -> None:
        super().__init__()
        self.rows, self.interactions = rows, config.interactions
        # rows from (id, seed), not from torch's global generator, which ranks run as threads
        # share: a draw here could land inside another rank's seeded build of its tower
        start = torch.arange(rows, dtype=torch.int64)
        self.table = nn.EmbeddingBag.from_pretrained(
            init_rows(start, config.dim, config.seed, config.init_scale),
            freeze=False,
            mode="sum",
            sparse=True,
        )
        self.tower = dense_tower(num_fields, config.dim, config.hidden, config.seed)

    def forward(self, keys: torch.Tensor) -> torch.Tensor:
        bags = hashed_rows(keys, self.rows).view(-1, 1)
        emb = self.table(bags).view(*keys.shape, -1)
        return forward(self.tower, emb, self.interactions)


def _sparse_optimizer(name: str, params: list[torch.Tensor], lr: float) -> torch.optim.Optimizer:
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    if name == "adam":
        return torch.optim.SparseAdam(params, lr=lr)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    raise ValueError(f"unknown sparse optimizer {name!r} (sgd, adagrad, adam)")


class StaticHashWorker:
    def __init__(
        self, comm: Communicator, group: Group, config: ParamServerConfig, dataset: str, rows: int
    ) -> None:
        self.comm, self.group, self.config = comm, group, config
        self.source: Source = open_source(config, dataset, group.index(comm.rank), group.size, None)
        self.model = StaticHashModel(rows, self.source.num_fields, config)
        self.dense = list(self.model.tower.parameters())
        self.dense_optimizer = torch.optim.Adam(self.dense, lr=config.dense_lr)
        self.sparse_optimizer = _sparse_optimizer(
            config.sparse_optimizer, [self.model.table.weight], config.sparse_lr
        )

    def train_step(self, step: int) -> float:
        """One data-parallel step; returns the loss averaged over the workers."""
        keys, labels = self.source.train_batch(step)
        loss = F.binary_cross_entropy_with_logits(self.model(keys), labels)
        for p in self.model.parameters():
            p.grad = None
        loss.backward()
        weight = self.model.table.weight
        assert weight.grad is not None
        touched = weight.grad.coalesce()
        rows, grads, mean_loss = self._exchange(
            touched.indices()[0], touched.values(), loss.detach()
        )
        weight.grad = torch.sparse_coo_tensor(
            rows.unsqueeze(0), grads, weight.shape, check_invariants=False
        )
        self.sparse_optimizer.step()
        self.dense_optimizer.step()
        return mean_loss

    def _exchange(
        self, rows: torch.Tensor, grads: torch.Tensor, loss: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, float]:
        """Average the dense gradients and the loss; gather every worker's rows and their
        gradients (each divided by the number of workers).

        Two all-gathers, as the sparse all-reduce under ``DistributedDataParallel`` does
        (sizes, then contents): row indices travel as int32 bit patterns inside the float32
        payload, which all-gather only copies.
        """
        size, dim = self.group.size, grads.shape[1]
        counts = self.comm.all_gather(torch.tensor([rows.numel()]), self.group)
        longest = max(int(c) for c in counts)
        dense = [p.grad.flatten() for p in self.dense if p.grad is not None]
        tail = torch.cat([*dense, loss.view(1)])
        payload = torch.zeros(longest * (1 + dim) + tail.numel(), dtype=torch.float32)
        payload[: rows.numel()] = rows.to(torch.int32).view(torch.float32)
        payload[longest : longest + grads.numel()] = grads.flatten()
        payload[longest * (1 + dim) :] = tail
        parts = self.comm.all_gather(payload, self.group)
        summed = torch.stack([part[longest * (1 + dim) :] for part in parts]).sum(0).div_(size)
        offset = 0
        for p in self.dense:
            assert p.grad is not None
            p.grad.copy_(summed[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
        every_row = [
            part[: int(n)].view(torch.int32) for part, n in zip(parts, counts, strict=True)
        ]
        every_grad = [
            part[longest : longest + int(n) * dim].view(-1, dim)
            for part, n in zip(parts, counts, strict=True)
        ]
        rows = torch.cat(every_row).to(torch.int64)
        return rows, torch.cat(every_grad).div_(size), float(summed[-1])

    def evaluate(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Scores and labels of every worker's share of the test rows, gathered."""
        keys, labels, _ = self.source.test_set()
        with torch.no_grad():
            scores = self.model(keys)
        gathered = torch.cat(self.comm.all_gather(torch.stack([scores, labels]), self.group), 1)
        return gathered[0], gathered[1]


@dataclass(frozen=True)
class StaticHashRun:
    dataset: str
    rows: int
    config: dict[str, Any]
    """A ``param_server`` job config: steps, batch size, dim, optimizers, model, seed."""


def train_static_hash(comm: Communicator, run: StaticHashRun) -> dict[str, Any]:
    """One worker of the baseline (every rank of ``comm``'s world is a worker)."""
    config = ParamServerConfig.model_validate(run.config)
    group = comm.world
    worker = StaticHashWorker(comm, group, config, run.dataset, run.rows)
    loss = float("nan")
    started = time.perf_counter()
    for step in range(config.steps):
        loss = worker.train_step(step)
    train_time = time.perf_counter() - started
    scores, labels = worker.evaluate()
    return {
        "steps": config.steps,
        "train_time_s": train_time,
        "step_time_s": train_time / config.steps,
        "loss": loss,
        "auc": auc(scores, labels),
        "table_rows": run.rows,
        "table_bytes": run.rows * 4 * floats_per_row(config.dim, config.sparse_optimizer),
    }


def run_static_hash(
    run: StaticHashRun, parties: Sequence[str], timeout_s: float = 3600.0
) -> list[dict[str, Any]]:
    """The baseline's workers, one process each, wired as the platform wires ``parties``."""
    results: list[dict[str, Any]] = run_world(
        train_static_hash, len(parties), run, parties=list(parties), timeout_s=timeout_s
    )
    return results
