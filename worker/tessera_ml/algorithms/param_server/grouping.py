"""A worker's batch of ids laid out for the servers: its keys grouped by the server that owns
them (``shard_of``), so each server's part of a request, of its reply and of the gradients is
one contiguous slice.

With deduplication the keys are the batch's distinct ids, in order of first occurrence within
each server's group; without it, every occurrence, in batch order within each group.
``inverse`` maps each id of the batch to its key. The compiled core (``native_table.c``)
groups in one pass over a small hash set; torch operations give the same result where it is
not built, and on a GPU (a server's rows there).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import torch

from tessera_ml.algorithms.param_server.hashing import SHARD_SALT, shard_of
from tessera_ml.algorithms.param_server.native import native_core


@dataclass(frozen=True)
class Grouped:
    keys: torch.Tensor
    """int64 ``[k]``: the keys of server 0, then those of server 1, …"""
    inverse: torch.Tensor
    """int64 ``[n]``: where each id of the batch lies in ``keys``."""
    counts: tuple[int, ...]
    """Keys per server."""

    def spans(self) -> list[tuple[int, int]]:
        """``(start, end)`` of each server's keys."""
        out, start = [], 0
        for count in self.counts:
            out.append((start, start + count))
            start += count
        return out


def group_by_shard(ids: torch.Tensor, shards: int, *, distinct: bool = True) -> Grouped:
    """``ids`` (any shape, int64) as keys grouped by server; ``distinct``: each id once."""
    flat = ids.reshape(-1).to(torch.int64).contiguous()
    core = native_core()
    if distinct and core is not None and flat.device.type == "cpu":
        return _group_native(core, flat, shards)
    return _group_torch(flat, shards, distinct)


def distinct(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The distinct values of ``ids`` in order of first occurrence, and where each id lies
    among them."""
    grouped = group_by_shard(ids, 1)
    return grouped.keys, grouped.inverse


def _group_native(core: ModuleType, flat: torch.Tensor, shards: int) -> Grouped:
    n = flat.numel()
    keys = torch.empty(n, dtype=torch.int64)
    inverse = torch.empty(n, dtype=torch.int64)
    counts = torch.empty(shards, dtype=torch.int64)
    salt = core.mix64(SHARD_SALT)
    found = core.group(
        flat.data_ptr(), n, salt, shards, keys.data_ptr(), inverse.data_ptr(), counts.data_ptr()
    )
    return Grouped(keys[:found], inverse, tuple(counts.tolist()))


def _group_torch(flat: torch.Tensor, shards: int, distinct: bool) -> Grouped:
    n, device = flat.numel(), flat.device
    position = torch.arange(n, dtype=torch.int64, device=device)
    if distinct:
        keys, inverse = torch.unique(flat, return_inverse=True)
        first = torch.full((keys.numel(),), n, dtype=torch.int64, device=device)
        first.scatter_reduce_(0, inverse, position, "amin")
    else:
        keys, inverse, first = flat, position, position
    shard = shard_of(keys, shards)
    order = torch.argsort(shard * max(n, 1) + first)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(order.numel(), dtype=torch.int64, device=device)
    counts = torch.bincount(shard, minlength=shards)
    return Grouped(keys[order], rank[inverse], tuple(counts.tolist()))
