"""What the compute parties tell the data holders during training, and how the trained model
is revealed.

Compute rank 0 sends each listener (``Roles.listeners``) a header of three int64 words,
(message, step, rows), after every step and evaluation and at the end. A LOSS or EVAL header is
followed by both compute parties' shares of the softmax output, sent to the labels party.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

import torch

from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.ring import Ring
from tessera_ml.algorithms.mpc_mixed.roles import Roles, checkpoint_marker, job_config
from tessera_ml.context import RankContext


class Phase(IntEnum):
    """The compute parties' repeating phases, whose material the dealer prepares ahead."""

    TRAIN = 1
    EVAL = 2


class Message(IntEnum):
    """The first word of a header."""

    DONE = 0
    LOSS = 1
    EVAL = 2
    STEP = 3


HEADER_WORDS = 3


def send_to_holders(
    ctx: RankContext, roles: Roles, index: int, message: Message, step: int, x: torch.Tensor
) -> None:
    """Compute party ``index``'s part of one message: party 0 sends the header; with LOSS and
    EVAL, both parties send their shares of ``x`` to the labels party."""
    if index == 0:
        rows = x.shape[0] if x.dim() else 0
        header = torch.tensor([message, step, rows], dtype=torch.int64)
        for r in roles.listeners:
            ctx.comm.send(header, r)
    if message not in (Message.DONE, Message.STEP):
        ctx.comm.send(x.contiguous(), roles.labels)


def receive_header(ctx: RankContext, roles: Roles) -> tuple[Message, int, int]:
    """(message, step, rows) from compute rank 0."""
    header = torch.empty(HEADER_WORDS, dtype=torch.int64)
    ctx.comm.recv(header, roles.compute[0])
    message, step, rows = (int(v) for v in header)
    return Message(message), step, rows


def receive_open(
    ctx: RankContext, roles: Roles, shape: tuple[int, int], ring: Ring
) -> torch.Tensor:
    """Both compute parties' shares of a message's tensor, added and decoded."""
    total = torch.zeros(shape, dtype=ring.dtype)
    for r in roles.compute:
        part = torch.empty(shape, dtype=ring.dtype)
        ctx.comm.recv(part, r)
        total = total + part
    return ring.decode(total)


def await_done(ctx: RankContext, roles: Roles) -> None:
    """A listener's wait for the end of training, recording each evaluation's checkpoint."""
    while True:
        message, step, _rows = receive_header(ctx, roles)
        if message == Message.DONE:
            return
        if message == Message.EVAL:
            checkpoint_marker(ctx)(step)


def reveal_targets(ctx: RankContext) -> list[int]:
    """The first rank of each party named in ``reveal_to``."""
    cfg = job_config(ctx)
    return sorted(min(s.rank for s in ctx.plan if s.party == p) for p in set(cfg.reveal_to))


def reveal_model(
    ctx: RankContext, roles: Roles, index: int, params: dict[str, torch.Tensor], prec: Precision
) -> dict[str, Any] | None:
    """Both shares of every parameter to each named party's first rank (as nested lists);
    the model in the clear if this compute party is one of them."""
    targets = reveal_targets(ctx)
    mine = dict(params)
    other = roles.compute[1 - index]
    plain = None
    for t in targets:
        if t == ctx.rank:
            continue
        if t == other:
            if index == 0:
                ctx.comm.send_data(mine, other)
            continue
        ctx.comm.send_data(mine, t)
    if ctx.rank in targets:
        theirs = ctx.comm.recv_data(other)
        plain = {k: prec.backward.decode(v + theirs[k]).tolist() for k, v in mine.items()}
    if index == 1 and other in targets:
        ctx.comm.send_data(mine, other)
    return plain


def receive_model(ctx: RankContext, roles: Roles, prec: Precision) -> dict[str, Any]:
    """The model in the clear, at a named party's first rank that is not a compute party."""
    a = ctx.comm.recv_data(roles.compute[0])
    b = ctx.comm.recv_data(roles.compute[1])
    return {k: prec.backward.decode(v + b[k]).tolist() for k, v in a.items()}
