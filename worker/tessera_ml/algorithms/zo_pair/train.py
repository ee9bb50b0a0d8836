"""The rank entry point of a ``zo_pair`` job: every rank is one processor."""

from __future__ import annotations

import time
from typing import Any

import torch

from tessera_ml.algorithms.zo_pair.data import PairStream, pair_dataset
from tessera_ml.algorithms.zo_pair.model import checksum, evaluate, load_weights, make_model
from tessera_ml.algorithms.zo_pair.protocol import PairProcessor, Schedule
from tessera_ml.algorithms.zo_pair.spec import PROCESSOR, ZoPairConfig
from tessera_ml.context import RankContext
from tessera_ml.data.tabular import Dataset


def build_processor(ctx: RankContext, data: Dataset) -> PairProcessor:
    """The model (fresh, or from ``init_checkpoint``) wrapped in this rank's pair protocol."""
    cfg = ctx.config
    assert isinstance(cfg, ZoPairConfig)
    model = make_model(cfg.model, data, seed=cfg.seed).to(ctx.device)
    if cfg.init_checkpoint:
        load_weights(model, cfg.init_checkpoint, ctx.device)
    processors = ctx.ranks_of(PROCESSOR)
    group = None if len(processors) == ctx.world_size else ctx.comm.new_group(processors, "pairs")
    return PairProcessor(
        model,
        ctx.comm,
        role_rank=ctx.slot.role_rank,
        num_processors=len(processors),
        job_seed=cfg.seed,
        epsilon=cfg.epsilon,
        schedule=Schedule(cfg.lr, cfg.steps, cfg.lr_schedule, cfg.warmup_steps),
        directions=cfg.directions,
        perturbation=cfg.perturbation,
        weight_decay=cfg.weight_decay,
        task=data.task,
        group=group,
    )


def run(ctx: RankContext) -> dict[str, Any]:
    cfg = ctx.config
    assert isinstance(cfg, ZoPairConfig)
    data = pair_dataset(ctx, cfg.dataset)
    if data.train.y is None:
        raise ValueError(f"rank {ctx.rank}: dataset {data.name} has no labels to train on")
    proc = build_processor(ctx, data)
    stream = PairStream(
        data.train.x.to(ctx.device),
        data.train.y.to(ctx.device),
        pair=proc.pair,
        job_seed=cfg.seed,
        micro_batch=cfg.micro_batch,
    )
    start = _resume(ctx, proc)
    initial = _agree_on_start(proc)
    reports_eval = ctx.slot.role_rank == 0
    examples_per_step = 2 * cfg.micro_batch * proc.num_pairs
    window_time, window_steps, done = 0.0, 0, start
    last_eval: dict[str, float] = {}
    evaluated_at = -1
    for step in range(start, cfg.steps):
        if ctx.stop.is_set():
            ctx.reporter.log(f"stopped at step {step}")
            break
        generated = proc.source.generated
        begin = time.perf_counter()
        x, y = stream.inputs(step)
        result = proc.step(step, x, y)
        window_time += time.perf_counter() - begin
        window_steps += 1
        done = step + 1
        if done % cfg.log_every == 0 or done == cfg.steps:
            grads = result.grad_scalars
            step_time = window_time / window_steps
            ctx.reporter.metrics(
                done,
                {
                    "loss": result.loss,
                    "grad_scalar_mean": float(grads.mean()),
                    "grad_scalar_std": float(grads.std()) if grads.numel() > 1 else 0.0,
                    "grad_scalar_abs_max": float(grads.abs().max()),
                    "lr": result.lr,
                    "step_time_s": step_time,
                    "throughput": examples_per_step / step_time,
                    "bytes_sent": float(ctx.comm.stats.sent),
                    "bytes_received": float(ctx.comm.stats.received),
                    "z_generations": (proc.source.generated - generated) / proc.source.total,
                },
            )
            ctx.reporter.progress(done, cfg.steps)
            window_time, window_steps = 0.0, 0
        if reports_eval and cfg.eval_every and done % cfg.eval_every == 0:
            last_eval, evaluated_at = evaluate(proc.model, data, ctx.device), done
            ctx.reporter.metrics(done, last_eval)
        if cfg.checkpoint_every and done % cfg.checkpoint_every == 0 and done < cfg.steps:
            _save(ctx, proc, done)
    if reports_eval and evaluated_at != done:
        last_eval = evaluate(proc.model, data, ctx.device)
        ctx.reporter.metrics(done, last_eval)
    _save(ctx, proc, done)
    ctx.reporter.progress(done, cfg.steps)
    ctx.reporter.flush()
    return {
        "steps": done,
        "initial_checksum": initial,
        "checksum": checksum(proc.model),
        "z_generations": proc.source.generations,
        "bytes_sent": ctx.comm.stats.sent,
        **last_eval,
    }


def _agree_on_start(proc: PairProcessor) -> str:
    """Every copy must start bit-identical (once per job: 32 bytes from each processor)."""
    digest = checksum(proc.model)
    mine = torch.frombuffer(bytearray.fromhex(digest), dtype=torch.uint8)
    others = proc.comm.all_gather(mine, proc.group)
    if any(not torch.equal(mine, other) for other in others):
        raise ValueError(
            "the processors' initial weights differ: the model (or its checkpoint) is not "
            "the same on every rank"
        )
    return digest


def _save(ctx: RankContext, proc: PairProcessor, done: int) -> None:
    state = {k: v.detach().cpu() for k, v in proc.model.state_dict().items()}
    ctx.save_checkpoint(done, {"step": done, "model": state})


def _resume(ctx: RankContext, proc: PairProcessor) -> int:
    state = ctx.load_checkpoint()
    if state is None:
        return 0
    proc.model.load_state_dict(state["model"])
    ctx.reporter.log(f"resumed from step {state['step']}")
    return int(state["step"])
