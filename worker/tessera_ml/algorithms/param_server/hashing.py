"""Counter-based hashing on int64 tensors: shard choice, hash-table slots and row initialisation.

Every function is a pure function of its inputs, so a row created on any server, in any run,
from the same id and seed has the same initial value. Arithmetic wraps modulo 2**64 as in C;
logical right shifts are emulated with masks because torch shifts int64 arithmetically.
"""

from __future__ import annotations

import torch

_GOLDEN = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed int64
_MUL1 = -4658895280553007687  # 0xBF58476D1CE4E5B9
_MUL2 = -7723592293110705685  # 0x94D049BB133111EB
_LOW24 = (1 << 24) - 1


def _shr(x: torch.Tensor, bits: int) -> torch.Tensor:
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def mix64(x: torch.Tensor) -> torch.Tensor:
    """The splitmix64 finaliser: a bijection of int64 with good avalanche."""
    x = x + _GOLDEN
    x = (x ^ _shr(x, 30)) * _MUL1
    x = (x ^ _shr(x, 27)) * _MUL2
    return x ^ _shr(x, 31)


def salted(ids: torch.Tensor, salt: int) -> torch.Tensor:
    """``mix64`` of ids under a salt (different salts give independent hashes)."""
    return mix64(ids ^ mix64(torch.tensor(salt, dtype=torch.int64)))


def shard_of(ids: torch.Tensor, num_shards: int) -> torch.Tensor:
    """Server index of each id: a hash, so ranges of ids spread evenly over servers."""
    return _shr(salted(ids, 0x5EED), 1) % num_shards


def uniform(keys: torch.Tensor) -> torch.Tensor:
    """A float32 in [0, 1) per int64 key, from the top 24 bits of its hash."""
    return (_shr(mix64(keys), 40) & _LOW24).to(torch.float32) * (1.0 / (1 << 24))


def uniform64(keys: torch.Tensor) -> torch.Tensor:
    """A float64 in [0, 1) per int64 key, from the top 53 bits of its hash."""
    return _shr(mix64(keys), 11).to(torch.float64) * (1.0 / (1 << 53))


def init_rows(ids: torch.Tensor, dim: int, seed: int, scale: float) -> torch.Tensor:
    """Initial embedding rows, uniform in [-scale, scale), determined by (id, column, seed).

    One full hash per id; column ``j`` takes the top 24 bits of that hash times an odd
    constant of its own (multiply-shift hashing), so a row costs a few operations per column.
    """
    base = salted(ids, seed).unsqueeze(1)
    multipliers = mix64(torch.arange(dim, dtype=torch.int64, device=ids.device)) | 1
    bits = (base * multipliers) >> 40
    u = bits.bitwise_and_(_LOW24).to(torch.float32)
    return u.mul_(2.0 * scale / (1 << 24)).sub_(scale)
