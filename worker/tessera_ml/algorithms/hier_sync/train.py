"""The rank entry point of ``hier_sync``: one device of one node."""

from __future__ import annotations

import time
from typing import Any, cast

import torch
from torch import nn

from tessera_ml.algorithms.hier_sync.capacity import agreed_fractions
from tessera_ml.algorithms.hier_sync.flat import FlatParams
from tessera_ml.algorithms.hier_sync.quantize import Bits, Codec
from tessera_ml.algorithms.hier_sync.spec import HierSyncConfig
from tessera_ml.algorithms.hier_sync.sync import (
    HierSync,
    OptimizerFactory,
    optimizer_state_bytes,
)
from tessera_ml.algorithms.hier_sync.topology import topology_from_plan
from tessera_ml.algorithms.hier_sync.workload import batch, rank_dataset, rank_model
from tessera_ml.context import RankContext
from tessera_ml.training import pieces
from tessera_ml.training.pieces import evaluate, loss_function, sync_buffers


def make_optimizer(config: HierSyncConfig) -> OptimizerFactory:
    return lambda params: pieces.make_optimizer(config, params)


def codec_of(config: HierSyncConfig) -> Codec | None:
    """The quantisation of the inter-node all-reduce the job asks for, if any."""
    bits = {"none": None, "int8": 8, "int4": 4}[config.inter_node_compression]
    return None if bits is None else Codec(cast(Bits, bits), config.compression_block)


class Trainer:
    """Model, data and synchroniser of one device; ``step`` runs one training step."""

    def __init__(self, ctx: RankContext) -> None:
        self.ctx = ctx
        self.config = cast(HierSyncConfig, ctx.config)
        self.topology = topology_from_plan(ctx.plan)
        self.data = rank_dataset(ctx, self.config)
        if self.data.train.y is None:
            raise ValueError(f"rank {ctx.rank}: dataset {self.data.name} has no labels")
        self.model = rank_model(self.config, self.data, ctx.device)
        self.criterion: nn.Module = loss_function(self.data)
        self.flat = FlatParams(self.model, self.config.bucket_bytes)
        self.capacity_fractions, self.reports = agreed_fractions(
            ctx.comm, self.topology, self.config, ctx.slot, ctx.device, self.flat.nbytes
        )
        self.sharded_phase_s = 0.0
        self.sharded_phase_cpu_s = 0.0
        """The process's CPU time (all its threads) over the last step's sharded phase."""
        self.sync = HierSync(
            ctx.comm,
            self.topology,
            self.flat,
            self.capacity_fractions,
            make_optimizer(self.config),
            align=self.config.align_elements,
            overlap=self.config.overlap,
            compression=codec_of(self.config),
            intra_node_transport=self.config.intra_node_transport,
            harness=self.ctx.harness,
        )
        self.inter_node_reported = (0, 0.0)
        """(step, cumulative inter-node bytes) at the last report."""

    def step(self, step: int) -> float:
        """Training step ``step`` (counted from 1, as ``ddp`` does)."""
        x, y = batch(self.data, self.config, self.ctx.slot.role_rank, step)
        x, y = x.to(self.ctx.device), y.to(self.ctx.device)
        self.sync.begin_step()
        with self.ctx.harness.work():
            out = self.model(x)
            target = y if self.data.task == "classification" else y.view(out.shape)
            loss = self.criterion(out, target)
            loss.backward()
        backward_done, cpu_then = time.perf_counter(), time.process_time()
        with self.ctx.harness.work():
            self.sync.finish_gradients()
        with self.ctx.harness.work():
            self.sync.apply()
        self.sharded_phase_s = time.perf_counter() - backward_done
        self.sharded_phase_cpu_s = time.process_time() - cpu_then
        return float(loss.detach())

    def link_bytes(self) -> dict[str, float]:
        """Cumulative bytes sent: in total, per peer and per kind of link."""
        stats = self.ctx.comm.stats
        node = set(self.sync.node)
        sent_to = dict(stats.sent_to)
        native = sum(b for g, b in stats.group_sent.items() if g.startswith("intra_node."))
        intra = sum(b for r, b in sent_to.items() if r in node) + native
        values: dict[str, float] = {
            "bytes_sent": float(stats.sent),
            "bytes_received": float(stats.received),
            "bytes_sent.group.intra_node": float(intra),
            "bytes_sent.group.inter_node": float(
                sum(b for r, b in sent_to.items() if r not in node)
            ),
        }
        values.update({f"bytes_sent.to.{r}": float(b) for r, b in sorted(sent_to.items())})
        link = self.ctx.harness.link_bytes()
        if link is not None:
            values["link_bytes_sent"] = float(link.sent)
        return values

    def report(self, step: int, loss: float, elapsed: float) -> None:
        config = self.config
        link = self.link_bytes()
        last_step, last_bytes = self.inter_node_reported
        inter_node = link["bytes_sent.group.inter_node"]
        per_step = (inter_node - last_bytes) / max(step - last_step, 1)
        self.inter_node_reported = (step, inter_node)
        self.ctx.reporter.metrics(
            step,
            {
                "loss": loss,
                "step_time_s": elapsed,
                "throughput": config.batch_size * self.topology.world_size / max(elapsed, 1e-9),
                "sharded_phase_s": self.sharded_phase_s,
                "sharded_phase_cpu_s": self.sharded_phase_cpu_s,
                "state_bytes": float(self.sync.state_bytes()),
                "optimizer_state_bytes": float(optimizer_state_bytes(self.sync.optimizer)),
                "slice_fraction": self.sync.slice_numel / self.flat.numel,
                "progress": step / config.steps,
                "inter_node_bytes_per_step": per_step,
                **link,
            },
        )
        self.ctx.reporter.progress(step, config.steps)

    def checkpoint(self, step: int) -> None:
        self.ctx.save_checkpoint(step, {"step": step, "slice": self.sync.slice_state()})

    def close(self) -> None:
        self.sync.close()


def stop_agreed(ctx: RankContext) -> bool:
    """Whether any rank was asked to stop: all ranks leave the loop at the same step."""
    flag = torch.tensor([1.0 if ctx.stop.is_set() else 0.0], device=ctx.device)
    ctx.comm.all_reduce(flag, "max")
    return bool(flag.item())


def run(ctx: RankContext) -> dict[str, Any]:
    trainer = Trainer(ctx)
    config = trainer.config
    resumed = ctx.load_checkpoint()
    start = 0
    if resumed is None:
        trainer.sync.start_fresh()
    else:
        trainer.sync.load_slice_state(resumed["slice"])
        start = int(resumed["step"])
        ctx.reporter.log(f"resumed from step {start}")
    step, loss, stopped = start, float("nan"), False
    try:
        for step in range(start + 1, config.steps + 1):
            if stop_agreed(ctx):
                stopped, step = True, step - 1
                break
            began = time.perf_counter()
            loss = trainer.step(step)
            elapsed = time.perf_counter() - began
            if step % config.log_interval == 0 or step == config.steps:
                trainer.report(step, loss, elapsed)
            if config.checkpoint_interval and step % config.checkpoint_interval == 0:
                trainer.checkpoint(step)
        if stopped and config.checkpoint_interval and step > start:
            trainer.checkpoint(step)
    finally:
        trainer.close()
    summary: dict[str, Any] = {
        "step": step,
        "loss": loss,
        "stopped": stopped,
        "node": trainer.topology.locate(ctx.rank)[0],
        "device_number": trainer.sync.number,
        "intra_node_transport": trainer.sync.node_ops.transport,
        "slice_fractions": trainer.sync.slice_fractions(),
        "capacity_fractions": trainer.capacity_fractions,
        "state_bytes": trainer.sync.state_bytes(),
        "optimizer_state_bytes": optimizer_state_bytes(trainer.sync.optimizer),
        "numel": trainer.flat.numel,
        **trainer.link_bytes(),
    }
    if not stopped:
        sync_buffers(ctx.comm, trainer.model, ctx.comm.world)
    if ctx.rank == trainer.topology.nodes[0][0] and not stopped:
        results = evaluate(trainer.model, trainer.data, trainer.criterion, ctx.device)
        ctx.reporter.metrics(step, results)
        summary.update(results)
    ctx.reporter.flush()
    return summary
