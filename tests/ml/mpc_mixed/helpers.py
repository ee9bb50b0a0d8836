"""Two in-process compute parties for protocol tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tessera_ml.algorithms.mpc_mixed.local import run_two, share
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.ring import Ring

RINGS = [Ring(32, 12), Ring(64, 20)]
"""The two rings the protocol tests run in, at the default fractional bits."""
GEN = torch.Generator().manual_seed(3)
"""The protocol tests' random inputs, one stream for both files."""


def gaussian(shape: tuple[int, ...], scale: float) -> torch.Tensor:
    """Real inputs, normal with standard deviation ``scale``, from ``GEN``."""
    return torch.randn(*shape, generator=GEN, dtype=torch.float64) * scale


def shared(
    *values: torch.Tensor, ring: Ring, seed: int = 7
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Additive shares (uniform, so they wrap around) of already encoded ring tensors."""
    gen = torch.Generator().manual_seed(seed)
    pairs = [share(v, gen, ring) for v in values]
    return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)


def on_both(
    fn: Callable[..., torch.Tensor],
    *values: torch.Tensor,
    ring: Ring,
    comparison: str = "tree",
    truncation: str = "masked",
) -> torch.Tensor:
    """Run ``fn(engine, *shares)`` on both parties and return the revealed result."""

    def body(eng: Engine, *args: torch.Tensor) -> torch.Tensor:
        return eng.reveal(fn(eng, *args))

    a0, a1 = shared(*values, ring=ring)
    r0, r1 = run_two(body, a0, a1, comparison=comparison, truncation=truncation)
    assert torch.equal(r0, r1)
    return r0
