"""PyTorch's own data-parallel methods on the ranks, model, data and optimizer of a
``hier_sync`` job: the baselines its benchmark runs in the same world.

- ``torch_ddp``: ``torch.nn.parallel.DistributedDataParallel`` with its default buckets and
  overlap (gradients as views into the buckets, which saves a copy and a gradient-sized buffer);
- ``fsdp_hybrid``: FSDP2 ``fully_shard`` over a 2-D ``DeviceMesh``, replicate across nodes x
  shard within the node (every ``Linear`` its own unit, then the root), parameters kept
  unsharded between forward and backward as ``hier_sync`` keeps them; equal shards.

Each step is timed as ``hier_sync`` times its own: from after the one-element all-reduce that
opens every ``hier_sync`` step (run here too) until the rank's parameters are updated. The
rank reports what a ``hier_sync`` rank reports (``step_time_s``, ``state_bytes``, ``loss``,
``link_bytes_sent`` on the testbed) into a ``RankOutcome``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal, cast

import torch
import torch.distributed as dist
from torch import nn

from tessera_ml.algorithms.hier_sync.spec import HierSyncConfig
from tessera_ml.algorithms.hier_sync.sync import held_bytes, optimizer_tensors
from tessera_ml.algorithms.hier_sync.topology import topology_from_plan
from tessera_ml.algorithms.hier_sync.workload import batch, rank_dataset, rank_model
from tessera_ml.comm.base import Communicator
from tessera_ml.harness import Harness
from tessera_ml.report import MemoryReporter
from tessera_ml.training.pieces import loss_function, make_optimizer
from tessera_ml.worlds import RankOutcome, rank_context

Method = Literal["torch_ddp", "fsdp_hybrid"]


@dataclass(frozen=True)
class TorchJob:
    """A baseline run with the model, data and optimizer of ``hier_sync`` job ``assignments``
    / ``config``."""

    method: Method
    assignments: list[dict[str, Any]]
    config: dict[str, Any]
    name: str
    keep_params: bool = False
    """Return the final parameters, flat and last layer first (``hier_sync``'s layout), as a
    numpy array (a tensor would travel back through shared memory the rank has left)."""


def _wrap(method: Method, model: nn.Module, nodes: int, k: int) -> nn.Module:
    if method == "torch_ddp":
        return nn.parallel.DistributedDataParallel(model, gradient_as_bucket_view=True)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(
        model_device_type(model), (nodes, k), mesh_dim_names=("replicate", "shard")
    )
    for module in model.modules():
        if isinstance(module, nn.Linear):
            fully_shard(module, mesh=mesh, reshard_after_forward=False)
    fully_shard(model, mesh=mesh, reshard_after_forward=False)
    return model


def model_device_type(model: nn.Module) -> str:
    return next(model.parameters()).device.type


def flat_params(model: nn.Module) -> torch.Tensor:
    """Full parameters, flat, last layer first; sharded ones are gathered first."""
    tensors = []
    for p in reversed(list(model.parameters())):
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        tensors.append(full.detach().reshape(-1).cpu())
    return torch.cat(tensors)


def run_torch(comm: Communicator, job: TorchJob, harness: Harness) -> RankOutcome:
    """This rank's part of ``job``; every rank of the world takes part."""
    reporter = MemoryReporter()
    ctx = rank_context(comm, "hier_sync", job.assignments, job.config, reporter=reporter)
    config = cast(HierSyncConfig, ctx.config)
    topology = topology_from_plan(ctx.plan)
    data = rank_dataset(ctx, config)
    model = rank_model(config, data, ctx.device)
    wrapped = _wrap(job.method, model, topology.num_nodes, topology.devices_per_node)
    optimizer = make_optimizer(config, list(model.parameters()))
    criterion = loss_function(data)
    flag = torch.zeros(1, device=ctx.device)
    loss = torch.zeros(())
    for step in range(1, config.steps + 1):
        comm.all_reduce(flag, "max")
        began = time.perf_counter()
        x, y = batch(data, config, ctx.slot.role_rank, step)
        x, y = x.to(ctx.device), y.to(ctx.device)
        optimizer.zero_grad(set_to_none=job.method == "fsdp_hybrid")
        out = wrapped(x)
        loss = criterion(out, y if data.task == "classification" else y.view(out.shape))
        loss.backward()
        optimizer.step()
        elapsed = time.perf_counter() - began
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        values = {
            "loss": float(loss.detach()),
            "step_time_s": elapsed,
            "state_bytes": float(held_bytes([*grads, *optimizer_tensors(optimizer)])),
            "optimizer_state_bytes": float(held_bytes(optimizer_tensors(optimizer))),
        }
        link = harness.link_bytes()
        if link is not None:
            values["link_bytes_sent"] = float(link.sent)
        reporter.metrics(step, values)
    result: dict[str, Any] = {"loss": float(loss.detach())}
    if job.keep_params:
        result["params"] = flat_params(model).numpy()
    if job.method == "fsdp_hybrid":
        dist.barrier()
    return RankOutcome(ctx.rank, ctx.role, ctx.party, result, reporter.points, [], [])
