"""The worker-server messages: headers, the combined PUSH_PULL payload, and the order a sync
server expects them in."""

from __future__ import annotations

import re

import pytest
import torch

from tessera_ml.algorithms.param_server.server import ShardServer
from tessera_ml.algorithms.param_server.wire import (
    UNIQUE,
    Header,
    Kind,
    WireError,
    push_pull_bytes,
    push_pull_payload,
    send_request,
    split_push_pull,
)
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.local import run_local
from tessera_ml.worlds import rank_context


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


# a sync server reads one request of every worker per round; workers that break step refuse
ROUND_JOB: list[dict[str, object]] = [
    {"party": "infra", "role": "server"},
    {"party": "shop-a", "role": "worker"},
    {"party": "shop-b", "role": "worker"},
]
ROUND_CONFIG = {"steps": 4, "batch_size": 8, "dim": 2, "hidden": [4]}


def _serve_or_send(comm: Communicator, requests: list[list[Header]]) -> str:
    """Rank 0 serves a sync job and returns the error it stops with; the other ranks send
    their ``requests`` (ids 1..count) and read the replies to the first round's pulls."""
    ctx = rank_context(comm, "param_server", ROUND_JOB, ROUND_CONFIG)
    if comm.rank == 0:
        with pytest.raises(WireError) as refused:
            ShardServer(ctx, [1, 2]).serve()
        return str(refused.value)
    for i, header in enumerate(requests[comm.rank - 1]):
        send_request(comm, 0, header, torch.arange(1, header.count + 1, dtype=torch.int64))
        if i == 0:
            comm.recv(torch.empty(header.count, 2), 0)
    return ""


@pytest.mark.parametrize(
    ("second_round", "reason"),
    [
        (
            [Header(Kind.STOP, 1, 0), Header(Kind.PULL, 1, 3, UNIQUE)],
            r"ranks \[1\] stopped while the other workers went on",
        ),
        (
            [Header(Kind.PULL, 1, 3, UNIQUE), Header(Kind.PULL, 1, 3, UNIQUE)],
            "rank 1 pulls step 1 before every worker pushed the steps before it",
        ),
    ],
)
def test_a_sync_server_refuses_workers_that_break_step(
    second_round: list[Header], reason: str
) -> None:
    first = Header(Kind.PULL, 0, 3, UNIQUE)
    requests = [[first, second_round[0]], [first, second_round[1]]]
    error = run_local(_serve_or_send, 3, requests, timeout_s=60)[0]
    assert re.search(reason, error)
