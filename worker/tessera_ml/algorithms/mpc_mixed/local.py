"""Two compute parties in one process (threads, in-memory link, in-process dealer).

What the protocol tests and the leakage test use; the platform runs ``train.run`` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.providers import LocalDealer
from tessera_ml.algorithms.mpc_mixed.ring import Ring
from tessera_ml.comm.peer import local_pair, run_pair


def engines(
    seed: int = 0, record: bool = False, comparison: str = "tree", truncation: str = "masked"
) -> tuple[Engine, Engine]:
    dealer = LocalDealer(seed)
    p0, p1 = local_pair()
    if record:
        p0.record, p1.record = [], []
    return (
        Engine(0, p0, dealer.provider(0), comparison, truncation),
        Engine(1, p1, dealer.provider(1), comparison, truncation),
    )


def share(x: torch.Tensor, gen: torch.Generator, ring: Ring) -> tuple[torch.Tensor, torch.Tensor]:
    """Additive shares of an already encoded ring tensor."""
    s0 = ring.random(tuple(x.shape), gen)
    return s0, x - s0


Shares = tuple[torch.Tensor, torch.Tensor]


def share_inputs(
    prec: Precision, x: torch.Tensor, onehot: torch.Tensor, seed: int
) -> tuple[Shares, Shares, Shares]:
    """What the data holders send: the features in the forward and the backward ring, the
    one-hot labels in the backward ring."""
    gen = torch.Generator().manual_seed(seed)
    return (
        share(prec.forward.encode(x), gen, prec.forward),
        share(prec.backward.encode(x), gen, prec.backward),
        share(prec.backward.encode(onehot), gen, prec.backward),
    )


def run_two(
    fn: Callable[..., Any],
    args0: tuple[Any, ...],
    args1: tuple[Any, ...],
    seed: int = 0,
    comparison: str = "tree",
    truncation: str = "masked",
) -> tuple[Any, Any]:
    """Run ``fn(engine, *args_i)`` for both parties concurrently."""
    e0, e1 = engines(seed, comparison=comparison, truncation=truncation)
    out = run_pair(fn, (e0, *args0), (e1, *args1))
    return out[0], out[1]
