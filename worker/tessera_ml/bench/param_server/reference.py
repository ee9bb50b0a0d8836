"""Sparse row optimizers checked against torch's dense optimizers on the same gradients.

SGD and Adagrad are compared with ``torch.optim.SGD`` / ``Adagrad`` on one dense ``[rows, dim]``
parameter whose gradient is zero outside the touched rows (zero gradients leave those rows
unchanged). Adam is
compared with ``torch.optim.Adam`` over one parameter per row, where untouched rows get no
gradient at all on a step, so each row's step count advances only when it is touched.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tessera_ml.algorithms.param_server.optim import make_optimizer
from tessera_ml.algorithms.param_server.table import DynamicTable


@dataclass
class DenseComparison:
    optimizer: str
    max_abs_diff: float
    """Largest difference over the touched rows, after every step."""
    untouched_identical: bool
    """Rows never touched are bit-identical to their initial values."""
    touched_rows: int


def compare_with_dense(
    name: str,
    *,
    rows: int = 1000,
    dim: int = 8,
    steps: int = 30,
    per_step: int = 100,
    lr: float = 0.05,
    seed: int = 0,
) -> DenseComparison:
    gen = torch.Generator().manual_seed(seed)
    optimizer = make_optimizer(name, lr)
    table = DynamicTable(dim=dim, slots=optimizer.slots(dim), seed=seed, block_rows=256)
    ids = torch.randint(-(1 << 62), 1 << 62, (4 * rows,), generator=gen).unique()[:rows]
    where = table.find_or_insert(ids)
    start = table.embeddings(where, ids).clone()
    if name == "adam":
        params = [torch.nn.Parameter(row.clone()) for row in start]
        dense: torch.optim.Optimizer = torch.optim.Adam(params, lr=lr, foreach=False)
    else:
        params = [torch.nn.Parameter(start.clone())]
        kind = torch.optim.Adagrad if name == "adagrad" else torch.optim.SGD
        dense = kind(params, lr=lr, foreach=False)
    # the last quarter of the ids is never touched
    candidates = rows - rows // 4
    ever = torch.zeros(rows, dtype=torch.bool)
    worst = 0.0
    for _ in range(steps):
        touched = torch.randperm(candidates, generator=gen)[:per_step]
        ever[touched] = True
        grad = torch.randn(per_step, dim, generator=gen)
        at = where[touched]
        table.write(at, optimizer.update(table.read(at), grad))
        if name == "adam":
            for p in params:
                p.grad = None
            for k, i in enumerate(touched.tolist()):
                params[i].grad = grad[k].clone()
        else:
            full = torch.zeros(rows, dim)
            full[touched] = grad
            params[0].grad = full
        dense.step()
        expected = torch.stack([p.detach() for p in params]) if name == "adam" else params[0]
        current = table.embeddings(where, ids)
        diff = (current[ever] - expected.detach()[ever]).abs().max()
        worst = max(worst, float(diff))
    final = table.embeddings(where, ids)
    return DenseComparison(
        optimizer=name,
        max_abs_diff=worst,
        untouched_identical=bool(torch.equal(final[~ever], start[~ever])),
        touched_rows=int(ever.sum()),
    )
