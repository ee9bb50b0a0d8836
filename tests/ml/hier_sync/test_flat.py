"""How ``FlatParams`` cuts a model's parameters into buckets."""

from __future__ import annotations

from itertools import pairwise

import pytest
import torch
from torch import nn

from tessera_ml.algorithms.hier_sync.flat import FlatParams

from .conftest import SMALL_BUCKETS


def mlp(*widths: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, o in pairwise(widths):
        layers += [nn.Linear(i, o), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def sizes(flat: FlatParams) -> list[int]:
    return [end - start for start, end in flat.buckets]


def position(flat: FlatParams, param: torch.Tensor) -> int:
    return next(i for i, p in enumerate(flat.params) if p is param)


def test_a_bucket_fills_to_at_least_its_bytes_and_a_bias_shares_its_weights_bucket() -> None:
    model = mlp(64, 2560, 2560, 2560, 10)
    flat = FlatParams(model, bucket_bytes=4 << 20)
    layers = [m for m in model if isinstance(m, nn.Linear)]
    # last layer first; each 2560 x 2560 weight (26 MB) closes a bucket, and the bias laid out
    # before it (ready with it) is in that bucket, not in one of its own
    assert sizes(flat) == [
        10 + 2560 * 10 + 2560 + 2560 * 2560,
        2560 + 2560 * 2560,
        2560 + 2560 * 64,
    ]
    for layer in layers:
        weight, bias = (position(flat, p) for p in (layer.weight, layer.bias))
        assert flat.bucket_of[weight] == flat.bucket_of[bias]
    # buckets tile the buffer in order; every one but the last holds at least the bytes asked
    assert flat.buckets[0][0] == 0 and flat.buckets[-1][1] == flat.numel
    assert all(a[1] == b[0] for a, b in pairwise(flat.buckets))
    assert all(n * 4 >= 4 << 20 for n in sizes(flat)[:-1])


@pytest.mark.parametrize(
    ("bucket_bytes", "expected"),
    [
        # laid out: 10 (last bias), 320, 32, 1536, 48, 3072 (first weight) elements
        (1024, [10 + 320, 32 + 1536, 48 + 3072]),
        (4096, [10 + 320 + 32 + 1536, 48 + 3072]),
        (1 << 20, [10 + 320 + 32 + 1536 + 48 + 3072]),
    ],
)
def test_a_bucket_closes_on_the_first_parameter_that_brings_it_to_its_bytes(
    bucket_bytes: int, expected: list[int]
) -> None:
    flat = FlatParams(mlp(64, 48, 32, 10), bucket_bytes)
    assert [p.numel() for p in flat.params] == [10, 320, 32, 1536, 48, 3072]
    assert sizes(flat) == expected
    # the parameters' views sit in their buckets, in layout order
    offset = 0
    for p, b in zip(flat.params, flat.bucket_of, strict=True):
        start, end = flat.buckets[b]
        assert start <= offset and offset + p.numel() <= end
        assert p.data.data_ptr() == flat.param[offset:].data_ptr()
        offset += p.numel()


def test_the_jobs_small_buckets_give_the_test_model_more_than_one_bucket() -> None:
    flat = FlatParams(mlp(64, 48, 10), SMALL_BUCKETS["bucket_bytes"])
    assert sizes(flat) == [10 + 48 * 10, 48 + 64 * 48]
