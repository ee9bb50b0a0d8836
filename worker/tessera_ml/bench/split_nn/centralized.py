"""The reference: one process training the composed network on the joined data.

Same initialisation, same aligned rows and same batches as a split_nn job, so the two must agree
to rounding. Used by the tests and the benchmark; it sees every party's data, a job never does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from tessera_ml.algorithms.split_nn.evaluation import metrics
from tessera_ml.algorithms.split_nn.models import (
    DTYPES,
    bottom_model,
    combine,
    combined_width,
    loss_sum,
    middle_model,
    output_width,
    top_model,
)
from tessera_ml.algorithms.split_nn.party_data import PartyData, Rows, load_party
from tessera_ml.algorithms.split_nn.schedule import batch_rows
from tessera_ml.algorithms.split_nn.spec import SPEC, SplitNNConfig
from tessera_ml.data.tabular import Task
from tessera_ml.spec import Assignment
from tessera_ml.training.pieces import make_optimizer


class ComposedNetwork(nn.Module):
    """bottom_i on party i's columns → combine → middle → top."""

    def __init__(
        self, bottoms: list[nn.Module], middle: nn.Module, top: nn.Module, how: str
    ) -> None:
        super().__init__()
        self.bottoms = nn.ModuleList(bottoms)
        self.middle = middle
        self.top = top
        self.how = how

    def forward(self, xs: list[torch.Tensor]) -> torch.Tensor:
        hs = [b(x) for b, x in zip(self.bottoms, xs, strict=True)]
        out: torch.Tensor = self.top(self.middle(combine(hs, self.how)))
        return out


@dataclass
class CentralResult:
    parameters: dict[int, dict[str, torch.Tensor]]
    """Per global rank of the equivalent job: the parameters that rank would hold."""
    losses: list[float] = field(default_factory=list)
    eval: dict[str, float] = field(default_factory=dict)


def _aligned(parts: list[Rows]) -> list[torch.Tensor]:
    """Positions of the common ids in each party's rows, ordered by id."""
    common = set(parts[0].ids.tolist())
    for p in parts[1:]:
        common &= set(p.ids.tolist())
    order = sorted(common, key=str)
    out = []
    for p in parts:
        where = {v: i for i, v in enumerate(p.ids.tolist())}
        out.append(torch.tensor([where[v] for v in order], dtype=torch.int64))
    return out


def train_centralized(assignments: list[dict[str, Any]], cfg: SplitNNConfig) -> CentralResult:
    plan = SPEC.make_plan([Assignment.model_validate(a) for a in assignments], cfg)
    features = [s for s in plan if s.role == "feature"]
    label = next(s for s in plan if s.role == "label")
    has_middle = any(s.role == "middle" for s in plan)
    shares: list[PartyData] = [
        load_party(s.dataset or cfg.dataset, s.role, s.party, s.options) for s in features
    ]
    label_share = load_party(label.dataset or cfg.dataset, "label", label.party, label.options)
    dtype = DTYPES[cfg.dtype]

    def joined(split: str) -> tuple[list[torch.Tensor], torch.Tensor]:
        rows = [getattr(d, split) for d in [*shares, label_share]]
        pos = _aligned(rows)
        xs = [r.x[p].to(dtype) for r, p in zip(rows[:-1], pos[:-1], strict=True)]
        return xs, rows[-1].y[pos[-1]]

    xs_train, y_train = joined("train")
    xs_test, y_test = joined("test")
    bottoms = [bottom_model(cfg, i, x.shape[1]) for i, x in enumerate(xs_train)]
    widths = [output_width(b, x.shape[1], dtype) for b, x in zip(bottoms, xs_train, strict=True)]
    middle = middle_model(cfg, combined_width(widths, cfg.combine))
    top = top_model(
        cfg,
        output_width(middle, combined_width(widths, cfg.combine), dtype),
        label_share.num_outputs,
    )
    net = ComposedNetwork(bottoms, middle, top, cfg.combine)
    optimizer = make_optimizer(cfg, list(net.parameters()))
    task: Task = label_share.task
    losses = []
    for step in range(cfg.steps):
        rows = batch_rows(step, int(y_train.shape[0]), cfg.batch_size, cfg.seed)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_sum(net([x[rows] for x in xs_train]), y_train[rows], task) / len(rows)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    net.eval()
    with torch.no_grad():
        final = metrics(net(xs_test), y_test, task)
    return CentralResult(_by_rank(net, features, label.rank, plan, has_middle), losses, final)


def _by_rank(
    net: ComposedNetwork, features: list[Any], label_rank: int, plan: list[Any], has_middle: bool
) -> dict[int, dict[str, torch.Tensor]]:
    def named(prefix: str, module: nn.Module) -> dict[str, torch.Tensor]:
        return {f"{prefix}.{n}": p.detach().clone() for n, p in module.named_parameters()}

    out = {s.rank: named("bottom", net.bottoms[i]) for i, s in enumerate(features)}
    if has_middle:
        out[next(s.rank for s in plan if s.role == "middle")] = named("middle", net.middle)
        out[label_rank] = named("top", net.top)
    else:
        out[label_rank] = {**named("middle", net.middle), **named("top", net.top)}
    return out


def max_abs_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    """Largest absolute difference between two sets of named parameters (tensors or arrays)."""
    if set(a) != set(b):
        raise ValueError(f"parameter names differ: {sorted(set(a) ^ set(b))}")
    diffs = (torch.as_tensor(a[k]) - torch.as_tensor(b[k]) for k in a)
    return max((float(d.abs().max()) for d in diffs), default=0.0)
