"""Hashing for the parameter server: shard choice and row initialisation, on the library's
counter-based hashes (``tessera_ml.hashing``)."""

from __future__ import annotations

import torch

from tessera_ml.hashing import LOW24, mix64, salted, shr

SHARD_SALT = 0x5EED


def shard_of(ids: torch.Tensor, num_shards: int) -> torch.Tensor:
    """Server index of each id: a hash, so ranges of ids spread evenly over servers."""
    return shr(salted(ids, SHARD_SALT), 1) % num_shards


def init_rows(ids: torch.Tensor, dim: int, seed: int, scale: float) -> torch.Tensor:
    """Initial embedding rows, uniform in [-scale, scale), determined by (id, column, seed).

    One full hash per id; column ``j`` takes the top 24 bits of that hash times an odd
    constant of its own (multiply-shift hashing), so a row costs a few operations per column.
    """
    base = salted(ids, seed).unsqueeze(1)
    multipliers = mix64(torch.arange(dim, dtype=torch.int64, device=ids.device)) | 1
    bits = (base * multipliers) >> 40
    u = bits.bitwise_and_(LOW24).to(torch.float32)
    return u.mul_(2.0 * scale / (1 << 24)).sub_(scale)
