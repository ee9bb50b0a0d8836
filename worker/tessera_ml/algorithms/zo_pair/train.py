"""The rank entry point of a ``zo_pair`` job: every rank is one processor."""

from __future__ import annotations

import time
from typing import Any

import torch

from tessera_ml.algorithms.zo_pair.data import PairStream, pair_dataset
from tessera_ml.algorithms.zo_pair.model import checksum, evaluate, load_weights, make_model
from tessera_ml.algorithms.zo_pair.protocol import PairProcessor, Schedule
from tessera_ml.algorithms.zo_pair.spec import PROCESSOR, ZoPairConfig
from tessera_ml.comm.pair_link import link_encrypted, open_link
from tessera_ml.comm.peer import Peer
from tessera_ml.context import RankContext
from tessera_ml.data.tabular import Dataset


def build_processor(ctx: RankContext, data: Dataset, peer: Peer | None = None) -> PairProcessor:
    """The model (fresh, or from ``init_checkpoint``) wrapped in this rank's pair protocol;
    ``peer``: the direct link between the two processors of a two-processor job."""
    cfg = ctx.config
    assert isinstance(cfg, ZoPairConfig)
    model = make_model(cfg.model, data, seed=cfg.seed).to(ctx.device)
    if cfg.init_checkpoint:
        load_weights(model, cfg.init_checkpoint, ctx.device, ctx.file_roots)
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
        peer=peer,
    )


def pair_link(ctx: RankContext) -> Peer | None:
    """With two processors on CPUs and ``link: direct``, a connection of their own for the
    losses (TLS between parties); None where the communicator all-gathers them: more
    processors, or processors on GPUs, whose losses live on the device."""
    cfg = ctx.config
    assert isinstance(cfg, ZoPairConfig)
    processors = ctx.ranks_of(PROCESSOR)
    if len(processors) != 2 or cfg.link != "direct":
        return None
    if ctx.device.type != "cpu":
        ctx.reporter.log(
            "the direct link is for processors on CPUs; the losses go over the communicator"
        )
        return None
    index = ctx.slot.role_rank
    peer, fell_back = open_link(ctx.comm, index, processors[1 - index], "direct")
    if fell_back is None:
        return peer
    peer.close()
    ctx.reporter.log(
        f"direct link to the other processor failed ({fell_back}); "
        "the losses go over the communicator",
        level="warning",
    )
    return None


def run(ctx: RankContext) -> dict[str, Any]:
    cfg = ctx.config
    assert isinstance(cfg, ZoPairConfig)
    data = pair_dataset(ctx, cfg.dataset)
    if data.train.y is None:
        raise ValueError(f"rank {ctx.rank}: dataset {data.name} has no labels to train on")
    peer = pair_link(ctx)
    try:
        return _train(ctx, data, build_processor(ctx, data, peer))
    finally:
        if peer is not None:
            peer.close()


def _train(ctx: RankContext, data: Dataset, proc: PairProcessor) -> dict[str, Any]:
    cfg = ctx.config
    assert isinstance(cfg, ZoPairConfig)
    labels = data.train.y
    assert labels is not None  # run() refuses a dataset without
    stream = PairStream(
        data.train.x.to(ctx.device),
        labels.to(ctx.device),
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
                    "bytes_sent": float(proc.bytes_sent),
                    "bytes_received": float(proc.bytes_received),
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
        "bytes_sent": proc.bytes_sent,
        "link": "direct" if proc.peer is not None else "communicator",
        "link_tls": proc.peer is not None and link_encrypted(ctx.comm, proc.peer),
        # what crossed the direct link, beside the communicator's own accounting
        "direct_link_bytes_sent": proc.link_bytes_sent,
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
