"""The rank's shard and rows per step, the loss, the optimizer and evaluation of
data-parallel training."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from tessera_ml.comm.base import Communicator, Group
from tessera_ml.context import RankContext
from tessera_ml.data.partition import shard_dataset
from tessera_ml.data.resolver import resolve
from tessera_ml.data.tabular import Dataset, Table
from tessera_ml.metrics import accuracy, auc
from tessera_ml.training.config import TrainingConfig


class OptimizerSettings(Protocol):
    @property
    def optimizer(self) -> str: ...
    @property
    def lr(self) -> float: ...
    @property
    def momentum(self) -> float: ...


FUSED_DEVICES = frozenset({"cpu", "cuda"})
"""Device types on which the optimizers run torch's fused kernels."""


def make_optimizer(
    settings: OptimizerSettings, params: Sequence[torch.Tensor]
) -> torch.optim.Optimizer:
    """``sgd`` (with momentum), ``adam`` or ``adamw``; weight decay where the settings have it.

    Fused where ``fused`` allows: one pass over each parameter's memory instead of one per
    arithmetic operation of the update (on CPU, Adam's step then takes a third of the time,
    SGD's a half). torch has no fused SGD for sharded (``DTensor``) parameters."""
    params = list(params)
    decay = float(getattr(settings, "weight_decay", 0.0))
    one_pass = fused(params)
    optimizer: torch.optim.Optimizer
    if settings.optimizer == "sgd":
        sharded = any(isinstance(p, DTensor) for p in params)
        optimizer = torch.optim.SGD(
            params,
            lr=settings.lr,
            momentum=settings.momentum,
            weight_decay=decay,
            fused=one_pass and not sharded,
        )
    elif settings.optimizer == "adam":
        optimizer = torch.optim.Adam(params, lr=settings.lr, weight_decay=decay, fused=one_pass)
    elif settings.optimizer == "adamw":
        optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=decay, fused=one_pass)
    else:
        raise ValueError(f"unknown optimizer {settings.optimizer!r}")
    _keep_kernels_on_load(optimizer)
    return optimizer


KERNEL_OPTIONS = ("fused", "foreach")
"""Param-group options that choose the update's kernel, not its arithmetic."""


def _keep_kernels_on_load(optimizer: torch.optim.Optimizer) -> None:
    """A checkpoint's param groups carry the kernel options of the code that saved them
    (``fused: None`` from before optimizers were fused). Before one is loaded, its groups take
    the options this optimizer was built with, so torch loads the state for this kernel (a
    fused group's step counts on its parameters' device)."""
    built = [{k: group.get(k) for k in KERNEL_OPTIONS} for group in optimizer.param_groups]

    def with_built_kernels(
        _opt: torch.optim.Optimizer, state_dict: dict[str, Any]
    ) -> dict[str, Any]:
        groups = state_dict["param_groups"]
        if len(groups) != len(built):  # torch's own check names the mismatch
            return state_dict
        merged = [{**group, **options} for group, options in zip(groups, built, strict=True)]
        return {**state_dict, "param_groups": merged}

    optimizer.register_load_state_dict_pre_hook(with_built_kernels)


def fused(params: Sequence[torch.Tensor]) -> bool:
    """Whether torch's fused kernels can update ``params``: floating point, all on one device
    type that has them."""
    kinds = {p.device.type for p in params}
    return (
        len(kinds) == 1
        and kinds <= FUSED_DEVICES
        and all(torch.is_floating_point(p) for p in params)
    )


def rank_dataset(ctx: RankContext, config: TrainingConfig, role: str) -> Dataset:
    """A party's own dataset is sharded over its processes; the job's over all ranks of
    ``role``."""
    if ctx.slot.dataset:
        own = [s for s in ctx.plan if s.assignment_index == ctx.slot.assignment_index]
        return shard_dataset(
            resolve(ctx.slot.dataset, ctx.data_root), ctx.slot.local_index, len(own)
        )
    ranks = ctx.ranks_of(role)
    return shard_dataset(resolve(config.dataset, ctx.data_root), ctx.slot.role_rank, len(ranks))


def batch_indices(rows: int, batch_size: int, seed: int, rank: int, step: int) -> torch.Tensor:
    """Rows of this rank's shard for one step: a pure function, so a resumed run repeats it."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + rank * 7919 + step)
    return torch.randint(0, rows, (batch_size,), generator=generator)


def loss_function(data: Dataset) -> nn.Module:
    if data.task == "classification":
        return nn.CrossEntropyLoss()
    if data.task == "binary":
        return nn.BCEWithLogitsLoss()
    return nn.MSELoss()


def sync_buffers(comm: Communicator, model: nn.Module, group: Group) -> None:
    """Average floating-point buffers (batch-norm statistics) so every rank evaluates alike."""
    buffers = [b for b in model.buffers() if b.is_floating_point()]
    if buffers:
        flat = torch.cat([b.reshape(-1) for b in buffers])
        comm.all_reduce(flat, "avg", group)
        offset = 0
        for b in buffers:
            b.copy_(flat[offset : offset + b.numel()].view_as(b))
            offset += b.numel()


@torch.no_grad()
def evaluate(
    model: nn.Module, data: Dataset, criterion: nn.Module, device: torch.device
) -> dict[str, float]:
    test: Table = data.test
    if test.y is None:
        return {}
    model.eval()
    out = model(test.x.to(device)).cpu()
    model.train()
    target = test.y.reshape(out.shape) if data.task != "classification" else test.y
    results = {"eval_loss": float(criterion(out, target))}
    if data.task == "classification":
        results["accuracy"] = accuracy(out, test.y)
    elif data.task == "binary":
        results["accuracy"] = accuracy(out, test.y)
        results["auc"] = auc(out, test.y)
    return results
