"""The worker-server messages: headers and the combined PUSH_PULL payload."""

from __future__ import annotations

import pytest
import torch

from tessera_ml.algorithms.param_server.wire import (
    UNIQUE,
    Header,
    Kind,
    WireError,
    push_pull_bytes,
    push_pull_payload,
    split_push_pull,
)


def test_a_header_survives_its_tensor() -> None:
    header = Header(Kind.PUSH_PULL, 41, 5, UNIQUE, 42, 7)
    assert Header.parse(header.tensor()) == header
    assert header.then() == Header(Kind.PULL, 42, 7, UNIQUE)


@pytest.mark.parametrize(("pushed", "pulled", "dim"), [(5, 7, 3), (0, 4, 16), (3, 0, 1), (0, 0, 2)])
def test_a_push_pull_payload_splits_into_the_ids_and_gradients_it_was_made_of(
    pushed: int, pulled: int, dim: int
) -> None:
    gen = torch.Generator().manual_seed(pushed * 100 + pulled)
    grads = torch.randn(pushed, dim, generator=gen)
    ids = torch.randint(-(2**62), 2**62, (pulled,), generator=gen)
    header = Header(Kind.PUSH_PULL, 3, pushed, 0, 4, pulled)

    payload = push_pull_payload(ids, grads)
    # what the server receives: a fresh buffer of the size the header announces
    received = torch.empty(push_pull_bytes(header, dim), dtype=torch.uint8)
    received.copy_(payload)
    got_ids, got_grads = split_push_pull(received, header, dim)

    assert torch.equal(got_ids, ids)
    assert torch.equal(got_grads, grads)
    assert got_grads.shape == (pushed, dim)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ([9, 0, 1, 0, 0, 0], "unknown request kind 9"),
        ([1, 0, -1, 0, 0, 0], "negative count"),
        ([5, 3, 1, 0, 4, -2], "negative count"),
        ([1, 0, 1, 6, 0, 0], "unknown flags"),
        ([5, 3, 1, 0, 3, 1], "pulls for step 3"),
    ],
)
def test_a_malformed_header_is_refused_with_its_reason(fields: list[int], reason: str) -> None:
    with pytest.raises(WireError, match=reason):
        Header.parse(torch.tensor(fields, dtype=torch.int64))
