"""The rank entry point of ``hier_sync``: one device of one node."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

from tessera_ml.algorithms.hier_sync.capacity import agreed_fractions
from tessera_ml.algorithms.hier_sync.flat import FlatParams
from tessera_ml.algorithms.hier_sync.spec import HierSyncConfig
from tessera_ml.algorithms.hier_sync.sync import HierSync, OptimizerFactory
from tessera_ml.algorithms.hier_sync.topology import topology_from_plan
from tessera_ml.algorithms.hier_sync.workload import Batches, build_mlp, load_dataset
from tessera_ml.context import RankContext


def make_optimizer(config: HierSyncConfig) -> OptimizerFactory:
    def build(params: list[torch.Tensor]) -> torch.optim.Optimizer:
        if config.optimizer == "adam":
            return torch.optim.Adam(params, lr=config.lr)
        return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum)

    return build


class Trainer:
    """Model, data and synchroniser of one device; ``step`` runs one training step."""

    def __init__(self, ctx: RankContext) -> None:
        config = ctx.config
        assert isinstance(config, HierSyncConfig)
        self.ctx = ctx
        self.config = config
        self.topology = topology_from_plan(ctx.plan)
        data = load_dataset(ctx.slot.dataset or config.dataset, config.seed)
        model = build_mlp(data.num_features, config.hidden, data.num_classes, config.seed)
        self.model = model.to(ctx.device)
        self.flat = FlatParams(self.model, config.bucket_bytes)
        self.capacity_fractions, self.reports = agreed_fractions(
            ctx.comm, self.topology, config, ctx.slot, ctx.device
        )
        self.sync = HierSync(
            ctx.comm,
            self.topology,
            self.flat,
            self.capacity_fractions,
            make_optimizer(config),
            align=config.align_elements,
            overlap=config.overlap,
        )
        self.batches = Batches(data, ctx.rank, ctx.world_size, config.batch_size, config.seed)

    def step(self, step: int) -> float:
        features, labels = self.batches(step)
        self.sync.begin_step()
        loss = F.cross_entropy(self.model(features.to(self.ctx.device)), labels.to(self.ctx.device))
        loss.backward()
        self.sync.finish_gradients()
        self.sync.apply()
        return float(loss.item())

    def link_bytes(self) -> dict[str, float]:
        """Cumulative bytes sent, in total, per peer and per link kind."""
        stats = self.ctx.comm.stats
        node = set(self.sync.node)
        values: dict[str, float] = {
            "bytes_sent": stats.sent,
            "bytes_received": stats.received,
            "bytes_sent.group.intra_node": sum(b for r, b in stats.sent_to.items() if r in node),
            "bytes_sent.group.inter_node": sum(
                b for r, b in stats.sent_to.items() if r not in node
            ),
        }
        values.update({f"bytes_sent.to.{r}": b for r, b in sorted(stats.sent_to.items())})
        return values

    def close(self) -> None:
        self.sync.close()


def run(ctx: RankContext) -> dict[str, Any]:
    trainer = Trainer(ctx)
    config = trainer.config
    state = ctx.load_checkpoint()
    first = 0
    if state is None:
        trainer.sync.assemble()
    else:
        trainer.sync.load_slice_state(state["slice"])
        first = int(state["step"])
    loss = float("nan")
    step = first
    try:
        for step in range(first, config.steps):
            if ctx.stop.is_set():
                break
            started = time.perf_counter()
            loss = trainer.step(step)
            elapsed = time.perf_counter() - started
            done = step + 1
            ctx.reporter.metrics(
                done,
                {
                    "loss": loss,
                    "step_time_s": elapsed,
                    "throughput": config.batch_size / elapsed,
                    "state_bytes": trainer.sync.state_bytes(),
                    "slice_fraction": trainer.sync.slice_numel / trainer.flat.numel,
                    "progress": done / config.steps,
                    **trainer.link_bytes(),
                },
            )
            ctx.reporter.progress(done, config.steps)
            if config.checkpoint_every and done % config.checkpoint_every == 0:
                ctx.save_checkpoint(done, {"step": done, "slice": trainer.sync.slice_state()})
            step = done
    finally:
        trainer.close()
    ctx.reporter.flush()
    return {
        "steps_done": step,
        "loss": loss,
        "node": trainer.topology.locate(ctx.rank)[0],
        "device_number": trainer.sync.number,
        "slice_fractions": trainer.sync.slice_fractions(),
        "capacity_fractions": trainer.capacity_fractions,
        "state_bytes": trainer.sync.state_bytes(),
        "param_checksum": float(trainer.flat.param.double().sum()),
        **trainer.link_bytes(),
    }
