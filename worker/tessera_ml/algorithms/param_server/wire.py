"""Messages between workers and servers: a fixed header, then a payload of known size.

Every request starts with the int64 header ``[kind, step, count, flags, then_step, then_count]``:

| kind      | payload worker -> server                   | reply server -> worker           |
| --------- | ------------------------------------------ | -------------------------------- |
| PULL      | ids int64 [count]                          | rows float32 [count, dim]        |
| LOOKUP    | ids int64 [count]                          | rows float32 [count, dim]        |
| PUSH      | grads float32 [count, dim]                 | none                             |
| PUSH_PULL | ids int64 [then_count], grads [count, dim] | rows float32 [then_count, dim]   |
| STOP      | none                                       | none                             |

A PULL creates absent ids; a LOOKUP answers them with their initial rows without creating them.
``flags`` bit 0 says the ids of a PULL are already unique. Messages between one worker and one
server stay in order, so a PUSH needs no ids: the server remembers the ids of that step's PULL.
PUSH_PULL is a PUSH followed by the PULL of a later step in one payload (one message instead of
two, the usual request of a training step); ``then_*`` are zero for the other kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import torch

from tessera_ml.comm.base import Communicator


class Kind(IntEnum):
    PULL = 1
    LOOKUP = 2
    PUSH = 3
    STOP = 4
    PUSH_PULL = 5


UNIQUE = 1
HEADER_LEN = 6
_KINDS = frozenset(int(k) for k in Kind)


class WireError(ValueError):
    """A request that breaks the protocol."""


@dataclass(frozen=True)
class Header:
    kind: Kind
    step: int
    count: int
    flags: int = 0
    then_step: int = 0
    then_count: int = 0

    def tensor(self) -> torch.Tensor:
        fields = [int(self.kind), self.step, self.count, self.flags]
        return torch.tensor([*fields, self.then_step, self.then_count], dtype=torch.int64)

    @classmethod
    def parse(cls, t: torch.Tensor) -> Header:
        """The header in ``t``; ``WireError`` if it cannot be a request."""
        kind, step, count, flags, then_step, then_count = (int(v) for v in t.tolist())
        if kind not in _KINDS:
            raise WireError(f"unknown request kind {kind}")
        if count < 0 or then_count < 0:
            raise WireError(f"negative count ({count}, {then_count})")
        if flags & ~UNIQUE:
            raise WireError(f"unknown flags {flags:#x}")
        if kind == Kind.PUSH_PULL and then_step <= step:
            raise WireError(f"a PUSH_PULL of step {step} pulls for step {then_step}")
        return cls(Kind(kind), step, count, flags, then_step, then_count)

    def then(self) -> Header:
        """The PULL inside a PUSH_PULL."""
        return Header(Kind.PULL, self.then_step, self.then_count, self.flags)


def recv_header(comm: Communicator, src: int) -> Header:
    buf = torch.empty(HEADER_LEN, dtype=torch.int64)
    comm.recv(buf, src)
    try:
        return Header.parse(buf)
    except WireError as exc:
        raise WireError(f"rank {src} sent a malformed request: {exc}") from None


def send_request(
    comm: Communicator, dst: int, header: Header, payload: torch.Tensor | None
) -> None:
    """Send a header and its payload from the calling thread. A server reads a worker's
    requests in order and replies to each, so a sender waits at most for the server to take
    the request (its reply may still be on its way)."""
    comm.send(header.tensor(), dst)
    if payload is not None and payload.numel():
        comm.send(payload.contiguous(), dst)


def push_pull_payload(ids: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """A PUSH_PULL's payload: the ids' bytes, then the gradients' (ids first keeps both aligned)."""
    return torch.cat([ids.view(torch.uint8), grads.contiguous().view(-1).view(torch.uint8)])


def push_pull_bytes(header: Header, dim: int) -> int:
    return header.then_count * 8 + header.count * dim * 4


def split_push_pull(
    payload: torch.Tensor, header: Header, dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ids ``[then_count]`` and the gradients ``[count, dim]`` of a PUSH_PULL's payload."""
    cut = header.then_count * 8
    grads = payload[cut:].view(torch.float32).view(header.count, dim)
    return payload[:cut].view(torch.int64), grads
