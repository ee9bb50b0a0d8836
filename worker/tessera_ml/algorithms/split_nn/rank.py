"""The entry point every split_nn rank runs: load, align, connect the cuts, train, evaluate."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from tessera_ml.algorithms.split_nn.alignment import (
    Alignment,
    align_as_feature,
    align_as_label,
    align_as_middle,
)
from tessera_ml.algorithms.split_nn.distributed_model import DistributedModel, Topology
from tessera_ml.algorithms.split_nn.evaluation import metrics
from tessera_ml.algorithms.split_nn.models import (
    DTYPES,
    bottom_model,
    middle_model,
    output_width,
    top_model,
)
from tessera_ml.algorithms.split_nn.party_data import PartyData, Rows, load_party
from tessera_ml.algorithms.split_nn.schedule import batch_rows, chunk_sizes, split_sizes
from tessera_ml.algorithms.split_nn.spec import SplitNNConfig
from tessera_ml.context import RankContext

EVAL_CHUNK = 512


def topology_of(ctx: RankContext) -> Topology:
    middle = ctx.ranks_of("middle")
    return Topology(
        rank=ctx.rank,
        role=ctx.role,
        feature_ranks=tuple(ctx.ranks_of("feature")),
        middle_rank=middle[0] if middle else None,
        label_rank=ctx.ranks_of("label")[0],
    )


@dataclass
class Local:
    """This party's aligned rows: features at a feature party, labels at the label party."""

    alignment: Alignment
    data: PartyData | None = None
    train: Rows | None = None
    test: Rows | None = None


def load_and_align(ctx: RankContext, cfg: SplitNNConfig, topo: Topology) -> Local:
    if topo.role == "middle":
        return Local(align_as_middle(ctx.comm, topo.label_rank))
    data = load_party(
        ctx.slot.dataset or cfg.dataset, topo.role, ctx.party, ctx.slot.options, ctx.data_root
    )
    if topo.role == "label":
        al = align_as_label(
            ctx.comm, data.train.ids, data.test.ids, list(topo.feature_ranks), topo.middle_rank
        )
    else:
        al = align_as_feature(ctx.comm, data.train.ids, data.test.ids, topo.label_rank)
    assert al.train is not None and al.test is not None
    return Local(al, data, data.train.take(al.train), data.test.take(al.test))


def connect(ctx: RankContext, cfg: SplitNNConfig, topo: Topology, local: Local) -> DistributedModel:
    dtype = DTYPES[cfg.dtype]
    if topo.role == "feature":
        assert local.data is not None
        width_in = local.data.num_features
        bottom = bottom_model(cfg, topo.feature_index, width_in)
        return DistributedModel.connect(
            ctx.comm,
            topo,
            cfg,
            bottom=bottom,
            bottom_width=output_width(bottom, width_in, dtype),
            device=ctx.device,
        )
    num_outputs = local.data.num_outputs if local.data is not None else 1
    return DistributedModel.connect(
        ctx.comm,
        topo,
        cfg,
        middle=lambda width: middle_model(cfg, width),
        top=lambda width: top_model(cfg, width, num_outputs),
        task=local.data.task if local.data is not None else "classification",
        device=ctx.device,
    )


@dataclass
class Meter:
    """Training-loop bytes and time, excluding setup and evaluation."""

    steps: int = 0
    seconds: float = 0.0
    bytes_sent: int = 0
    link_bytes_sent: int = 0
    """On a network testbed: bytes this host put on its link (interface counters)."""
    window: list[float] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)


def run(ctx: RankContext) -> dict[str, Any]:
    cfg = ctx.config
    if not isinstance(cfg, SplitNNConfig):
        cfg = SplitNNConfig.model_validate(cfg.model_dump())
    topo = topology_of(ctx)
    local = load_and_align(ctx, cfg, topo)
    dm = connect(ctx, cfg, topo, local)
    dtype = DTYPES[cfg.dtype]
    x_train = x_test = y_train = y_test = None
    if local.train is not None and local.train.x is not None:
        x_train = local.train.x.to(ctx.device, dtype)
        x_test = (
            local.test.x.to(ctx.device, dtype) if local.test and local.test.x is not None else None
        )
    if local.train is not None and local.train.y is not None:
        y_train = local.train.y.to(ctx.device)
        y_test = local.test.y.to(ctx.device) if local.test and local.test.y is not None else None

    start = 0
    state = ctx.load_checkpoint()
    if state is not None:
        dm.load_state_dict(state["model"])
        start = int(state["step"])

    n_train, n_test = local.alignment.num_train, local.alignment.num_test
    sizes = split_sizes(cfg.batch_size, cfg.micro_batches)
    meter = Meter()
    last_eval: dict[str, float] = {}
    step = start
    for step in range(start, cfg.steps):
        if step % cfg.stop_check_every == 0 and _stop_agreed(ctx, meter):
            ctx.reporter.log(f"stopping at step {step}: cancelled")
            break
        rows = batch_rows(step, n_train, cfg.batch_size, cfg.seed)
        link0 = ctx.harness.link_bytes()
        sent0, t0 = ctx.comm.stats.sent, time.perf_counter()
        loss = dm.train_step(
            sizes,
            x=None if x_train is None else x_train[rows],
            y=None if y_train is None else y_train[rows],
        )
        elapsed = time.perf_counter() - t0
        link1 = ctx.harness.link_bytes()
        if link0 is not None and link1 is not None:
            meter.link_bytes_sent += link1.sent - link0.sent
        meter.steps += 1
        meter.step_times.append(elapsed)
        meter.seconds += elapsed
        meter.bytes_sent += ctx.comm.stats.sent - sent0
        meter.window.append(elapsed)
        done = step + 1
        if done % cfg.report_every == 0 or done == cfg.steps:
            _report(ctx, cfg, done, loss, meter)
        if (cfg.eval_every and done % cfg.eval_every == 0) or done == cfg.steps:
            last_eval = _evaluate(ctx, dm, n_test, x_test, y_test, done)
        if cfg.checkpoint_every and done % cfg.checkpoint_every == 0:
            ctx.save_checkpoint(done, {"step": done, "model": dm.state_dict()})
    else:
        step = cfg.steps
    ctx.reporter.flush()
    return {
        "role": topo.role,
        "party": ctx.party,
        "steps": step,
        "parameters": {k: v.cpu().numpy() for k, v in dm.parameters().items()},
        "train_steps": meter.steps,
        "train_seconds": meter.seconds,
        "train_bytes_sent": meter.bytes_sent,
        "train_link_bytes_sent": meter.link_bytes_sent,
        "step_times": meter.step_times,
        "analytic_bytes_sent_per_step": dm.analytic_bytes_per_step(cfg.batch_size),
        "bytes": ctx.comm.stats.snapshot(),
        "eval": last_eval,
        "num_train": n_train,
        "num_test": n_test,
    }


def _stop_agreed(ctx: RankContext, meter: Meter) -> bool:
    before = ctx.comm.stats.sent
    flag = torch.tensor([1 if ctx.stop.is_set() else 0], dtype=torch.int32)
    ctx.comm.all_reduce(flag, "max")
    meter.bytes_sent += ctx.comm.stats.sent - before
    return bool(flag.item())


def _report(
    ctx: RankContext, cfg: SplitNNConfig, done: int, loss: float | None, meter: Meter
) -> None:
    stats = ctx.comm.stats
    step_time = sum(meter.window) / max(1, len(meter.window))
    meter.window.clear()
    values: dict[str, float] = {
        "step_time_s": step_time,
        "throughput": cfg.batch_size / step_time if step_time > 0 else 0.0,
        "bytes_sent": float(stats.sent),
        "bytes_received": float(stats.received),
        "bytes_per_step": meter.bytes_sent / max(1, meter.steps),
        "progress": done / cfg.steps,
    }
    values.update({f"bytes_sent.to.{peer}": float(b) for peer, b in stats.sent_to.items()})
    link = ctx.harness.link_bytes()
    if link is not None:
        values["link_bytes_sent"] = float(link.sent)
    if loss is not None:
        values["loss"] = loss
    ctx.reporter.metrics(done, values)
    ctx.reporter.progress(done, cfg.steps)


def _evaluate(
    ctx: RankContext,
    dm: DistributedModel,
    n_test: int,
    x_test: torch.Tensor | None,
    y_test: torch.Tensor | None,
    done: int,
) -> dict[str, float]:
    if n_test == 0:
        return {}
    logits = dm.predict(chunk_sizes(n_test, EVAL_CHUNK), x=x_test)
    if logits is None or y_test is None:
        return {}
    values = metrics(logits.cpu(), y_test.cpu(), dm.task)
    ctx.reporter.metrics(done, values)
    return values
