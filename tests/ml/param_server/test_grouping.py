"""A worker's ids grouped by server: the compiled pass and the torch fallback agree."""

from __future__ import annotations

import pytest
import torch

from tessera_ml.algorithms.param_server import native
from tessera_ml.algorithms.param_server.grouping import (
    _group_torch,
    distinct,
    group_by_shard,
)
from tessera_ml.algorithms.param_server.hashing import shard_of

needs_native = pytest.mark.skipif(not native.available(), reason="the compiled core is not built")


def _batch(seed: int, n: int) -> torch.Tensor:
    """Ids with many repeats, of both signs and spread over the int64 range."""
    gen = torch.Generator().manual_seed(seed)
    low = torch.randint(0, max(1, n // 3), (n,), generator=gen)
    high = torch.randint(-4, 4, (n,), generator=gen) << 60
    return high + low


@pytest.mark.parametrize("shards", [1, 2, 3, 7])
@pytest.mark.parametrize("n", [0, 1, 257, 8192])
def test_the_grouping_lays_out_each_servers_keys_together(shards: int, n: int) -> None:
    ids = _batch(n * 10 + shards, n).view(-1, 1) if n else torch.empty(0, 1, dtype=torch.int64)
    for grouped in (group_by_shard(ids, shards), _group_torch(ids.flatten(), shards, True)):
        keys = grouped.keys
        assert torch.equal(keys[grouped.inverse], ids.flatten())
        assert keys.unique().numel() == keys.numel()
        assert sum(grouped.counts) == keys.numel()
        for s, (start, end) in enumerate(grouped.spans()):
            assert bool((shard_of(keys[start:end], shards) == s).all())
            # within a server: the order in which the batch first shows each id
            first = [int((ids.flatten() == k).nonzero()[0]) for k in keys[start:end]]
            assert first == sorted(first)


@needs_native
@pytest.mark.parametrize("seed", range(20))
def test_the_compiled_grouping_equals_the_torch_one(seed: int) -> None:
    ids = _batch(seed, 50 + 400 * seed)
    for shards in (1, 2, 5):
        compiled = group_by_shard(ids, shards)
        fallback = _group_torch(ids, shards, True)
        assert torch.equal(compiled.keys, fallback.keys)
        assert torch.equal(compiled.inverse, fallback.inverse)
        assert compiled.counts == fallback.counts


def test_without_deduplication_every_occurrence_is_kept_in_batch_order() -> None:
    ids = _batch(5, 1000)
    grouped = group_by_shard(ids, 3, distinct=False)
    assert grouped.keys.numel() == ids.numel()
    assert torch.equal(grouped.keys[grouped.inverse], ids)
    for s, (start, end) in enumerate(grouped.spans()):
        assert torch.equal(grouped.keys[start:end], ids[shard_of(ids, 3) == s])


def test_distinct_values_come_in_order_of_first_occurrence() -> None:
    values, where = distinct(torch.tensor([7, 3, 7, 7, -1, 3, 9]))
    assert values.tolist() == [7, 3, -1, 9]
    assert where.tolist() == [0, 1, 0, 0, 2, 1, 3]
