"""One ``ddp`` trainer rank: local forward/backward, one flat gradient all-reduce, step."""

from __future__ import annotations

import time
from typing import Any, cast

import torch
from torch import nn

from tessera_ml.algorithms.ddp.spec import DDPConfig
from tessera_ml.comm.base import Communicator, Group
from tessera_ml.context import RankContext
from tessera_ml.data.tabular import Dataset
from tessera_ml.models.zoo import build_model, seeded
from tessera_ml.training import pieces
from tessera_ml.training.pieces import (
    batch_indices,
    evaluate,
    loss_function,
    make_optimizer,
    sync_buffers,
)


def rank_dataset(ctx: RankContext, cfg: DDPConfig) -> Dataset:
    return pieces.rank_dataset(ctx, cfg, "trainer")


def flat_all_reduce(comm: Communicator, params: list[nn.Parameter], group: Group) -> None:
    """Average every gradient over ``group`` with one all-reduce of one flat buffer."""
    flat = torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
    )
    comm.all_reduce(flat, "avg", group)
    offset = 0
    for p in params:
        n = p.numel()
        chunk = flat[offset : offset + n].view_as(p)
        if p.grad is None:
            p.grad = chunk.clone()
        else:
            p.grad.copy_(chunk)
        offset += n


def broadcast_parameters(comm: Communicator, model: nn.Module, group: Group) -> None:
    """Start every rank from rank 0's initial weights (custom models may ignore the seed)."""
    tensors = list(model.state_dict().values())
    flat = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in tensors])
    comm.broadcast(flat, group.ranks[0], group)
    offset = 0
    for t in tensors:
        t.copy_(flat[offset : offset + t.numel()].view_as(t).to(t.dtype))
        offset += t.numel()


def state_bytes(params: list[nn.Parameter], optimizer: torch.optim.Optimizer) -> int:
    grads = sum(p.numel() * p.element_size() for p in params)
    slots = sum(
        v.numel() * v.element_size()
        for s in optimizer.state.values()
        for v in s.values()
        if isinstance(v, torch.Tensor)
    )
    return grads + slots


def run(ctx: RankContext) -> dict[str, Any]:
    cfg = cast(DDPConfig, ctx.config)
    comm = ctx.comm
    group = (
        comm.world
        if len(ctx.ranks_of("trainer")) == comm.world_size
        else comm.new_group(ctx.ranks_of("trainer"), "trainers")
    )
    data = rank_dataset(ctx, cfg)
    if data.train.y is None:
        raise ValueError(f"rank {ctx.rank}: dataset {data.name} has no labels to train on")
    model = seeded(cfg.seed, lambda: build_model(cfg.model, dataset=data)).to(ctx.device)
    broadcast_parameters(comm, model, group)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(cfg, params)
    criterion = loss_function(data)
    start = 0
    resumed = ctx.load_checkpoint()
    if resumed is not None:
        model.load_state_dict(resumed["model"])
        optimizer.load_state_dict(resumed["optimizer"])
        start = int(resumed["step"])
        ctx.reporter.log(f"resumed from step {start}")
    step, loss_value, stopped = start, float("nan"), False
    train, world = data.train, group.size
    for step in range(start + 1, cfg.steps + 1):
        if ctx.stop.is_set():
            stopped, step = True, step - 1
            break
        began = time.perf_counter()
        rows = batch_indices(len(train), cfg.batch_size, cfg.seed, ctx.slot.role_rank, step)
        x, y = train.x[rows].to(ctx.device), cast(torch.Tensor, train.y)[rows].to(ctx.device)
        out = model(x)
        loss = criterion(out, y if data.task == "classification" else y.reshape(out.shape))
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        flat_all_reduce(comm, params, group)
        optimizer.step()
        loss_value = float(loss.detach())
        elapsed = time.perf_counter() - began
        if step % cfg.log_interval == 0 or step == cfg.steps:
            _report_step(ctx, cfg, step, loss_value, elapsed, world, params, optimizer)
        last = step == cfg.steps
        if (cfg.eval_interval and step % cfg.eval_interval == 0) or last:
            sync_buffers(comm, model, group)
            if ctx.rank == group.ranks[0]:
                results = evaluate(model, data, criterion, ctx.device)
                ctx.reporter.metrics(step, results)
                shown = " ".join(f"{k} {v:.4f}" for k, v in results.items())
                ctx.reporter.log(f"step {step}/{cfg.steps}: loss {loss_value:.4f} {shown}")
        if cfg.checkpoint_interval and (step % cfg.checkpoint_interval == 0 or last):
            _checkpoint(ctx, step, model, optimizer)
    if stopped and cfg.checkpoint_interval and step > start:
        _checkpoint(ctx, step, model, optimizer)
    ctx.reporter.flush()
    summary: dict[str, Any] = {"step": step, "loss": loss_value, "stopped": stopped}
    summary.update({"bytes_sent": comm.stats.sent, "bytes_received": comm.stats.received})
    if ctx.rank == group.ranks[0] and not stopped:
        summary.update(evaluate(model, data, criterion, ctx.device))
    return summary


def _report_step(
    ctx: RankContext,
    cfg: DDPConfig,
    step: int,
    loss: float,
    elapsed: float,
    world: int,
    params: list[nn.Parameter],
    optimizer: torch.optim.Optimizer,
) -> None:
    values = {
        "loss": loss,
        "step_time_s": elapsed,
        "throughput": cfg.batch_size * world / max(elapsed, 1e-9),
        "state_bytes": float(state_bytes(params, optimizer)),
        "progress": step / cfg.steps,
        **ctx.comm.stats.metrics(),
    }
    link = ctx.harness.link_bytes()
    if link is not None:
        values["link_bytes_sent"] = float(link.sent)
    ctx.reporter.metrics(step, values)
    ctx.reporter.progress(step, cfg.steps)


def _checkpoint(
    ctx: RankContext, step: int, model: nn.Module, optimizer: torch.optim.Optimizer
) -> None:
    ctx.save_checkpoint(
        step, {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    )
