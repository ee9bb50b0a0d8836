"""Ring collectives over point-to-point transfers, with uneven chunks.

gloo's reduce-scatter is an all-reduce followed by a copy (twice the traffic) and wants equal
chunks, so the slices travel here over ``isend``/``irecv``. On a ring of ``n`` members whose
chunks are ``c_0 .. c_{n-1}`` (chunk ``j`` ends at member ``j``), member ``p`` sends:

- reduce-scatter: every chunk but its own once, ``sum(c) - c_p`` bytes;
- all-gather: every chunk but the next member's once, ``sum(c) - c_{p+1}``;
- all-reduce (even chunks): reduce-scatter then all-gather, ``2 (n-1)/n x`` the tensor; a
  pair instead swaps the whole tensor once (the same bytes, one round trip instead of two).

Summed over the members, each collective moves ``(n-1) x sum(c)``.

Transfers between one pair of ranks are matched in issue order, so every member must run the
same sequence of collectives on the same ring.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tessera_ml.algorithms.hier_sync.slicing import even_bounds
from tessera_ml.comm.base import Communicator, Work


def _exchange(
    comm: Communicator,
    send: torch.Tensor,
    dst: int,
    recv: torch.Tensor,
    src: int,
) -> None:
    works: list[Work] = []
    if recv.numel():
        works.append(comm.irecv(recv, src))
    if send.numel():
        works.append(comm.isend(send, dst))
    for work in works:
        work.wait()


def _neighbours(comm: Communicator, ranks: Sequence[int]) -> tuple[int, int, int]:
    position = list(ranks).index(comm.rank)
    n = len(ranks)
    return position, ranks[(position + 1) % n], ranks[(position - 1) % n]


def reduce_scatter(
    comm: Communicator, ranks: Sequence[int], buffer: torch.Tensor, bounds: Sequence[int]
) -> None:
    """Sum ``buffer`` over ``ranks``; on return chunk ``p`` of member ``p`` holds the sum.

    ``buffer`` is 1-D; chunk ``j`` is ``buffer[bounds[j]:bounds[j+1]]``. Other chunks of the
    buffer are left with partial sums.
    """
    n = len(ranks)
    assert len(bounds) == n + 1, (bounds, ranks)
    if n == 1:
        return
    position, nxt, prv = _neighbours(comm, ranks)
    widest = max(bounds[j + 1] - bounds[j] for j in range(n))
    scratch = torch.empty(widest, dtype=buffer.dtype, device=buffer.device)
    for step in range(n - 1):
        out = (position - step - 1) % n
        into = (position - step - 2) % n
        incoming = scratch[: bounds[into + 1] - bounds[into]]
        _exchange(comm, buffer[bounds[out] : bounds[out + 1]], nxt, incoming, prv)
        buffer[bounds[into] : bounds[into + 1]].add_(incoming)


def all_gather(
    comm: Communicator, ranks: Sequence[int], buffer: torch.Tensor, bounds: Sequence[int]
) -> None:
    """Member ``p`` contributes chunk ``p`` of ``buffer``; on return every chunk is filled."""
    n = len(ranks)
    assert len(bounds) == n + 1, (bounds, ranks)
    if n == 1:
        return
    position, nxt, prv = _neighbours(comm, ranks)
    for step in range(n - 1):
        out = (position - step) % n
        into = (position - step - 1) % n
        _exchange(
            comm,
            buffer[bounds[out] : bounds[out + 1]],
            nxt,
            buffer[bounds[into] : bounds[into + 1]],
            prv,
        )


def all_reduce(
    comm: Communicator, ranks: Sequence[int], buffer: torch.Tensor, align: int = 16
) -> None:
    """In-place sum of a 1-D ``buffer`` over ``ranks``: reduce-scatter, then all-gather; a
    pair swaps the whole buffer and each member adds the other's.

    Every member ends with bitwise the same sum: a ring sums each chunk once, then copies it,
    and a pair's members add the same two numbers (floating-point addition commutes).
    """
    if len(ranks) == 1:
        return
    if len(ranks) == 2:
        _, other, _ = _neighbours(comm, ranks)
        incoming = torch.empty_like(buffer)
        _exchange(comm, buffer, other, incoming, other)
        buffer.add_(incoming)
        return
    bounds = even_bounds(buffer.numel(), len(ranks), align)
    reduce_scatter(comm, ranks, buffer, bounds)
    all_gather(comm, ranks, buffer, bounds)
