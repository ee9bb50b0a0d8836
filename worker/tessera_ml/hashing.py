"""Counter-based hashing on int64 tensors: pure functions of their inputs, so anything drawn
from them (a row's initial value, a generated sample) is the same on any host, in any run.
Arithmetic wraps modulo 2**64 as in C; logical right shifts are emulated with masks because
torch shifts int64 arithmetically.
"""

from __future__ import annotations

import torch

_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed int64
_MUL1 = -4658895280553007687  # 0xBF58476D1CE4E5B9
_MUL2 = -7723592293110705685  # 0x94D049BB133111EB
LOW24 = (1 << 24) - 1


def shr(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 ``x``."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """The splitmix64 finaliser: a bijection of int64 with good avalanche."""
    x = x + _GOLDEN
    x = (x ^ shr(x, 30)) * _MUL1
    x = (x ^ shr(x, 27)) * _MUL2
    return x ^ shr(x, 31)


def salted(ids: torch.Tensor, salt: int) -> torch.Tensor:
    """``mix64`` of ids under a salt (different salts give independent hashes)."""
    return mix64(ids ^ mix64(torch.tensor(salt, dtype=torch.int64)))


def uniform(keys: torch.Tensor) -> torch.Tensor:
    """A float32 in [0, 1) per int64 key, from the top 24 bits of its hash."""
    return (shr(mix64(keys), 40) & LOW24).to(torch.float32) * (1.0 / (1 << 24))


def uniform64(keys: torch.Tensor) -> torch.Tensor:
    """A float64 in [0, 1) per int64 key, from the top 53 bits of its hash."""
    return shr(mix64(keys), 11).to(torch.float64) * (1.0 / (1 << 53))
