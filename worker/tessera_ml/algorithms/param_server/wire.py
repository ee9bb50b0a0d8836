"""Messages between workers and servers: a fixed header, then a payload of known size.

Every request starts with the int64 header ``[kind, step, count, flags]``:

| kind   | payload worker -> server   | reply server -> worker                        |
| ------ | -------------------------- | --------------------------------------------- |
| PULL   | ids int64 [count]          | rows float32 [count, dim]; absent ids created |
| LOOKUP | ids int64 [count]          | rows float32 [count, dim]; absent: initial    |
| PUSH   | grads float32 [count, dim] | none (the ids are those of the step's PULL)   |
| STOP   | none                       | none                                          |

``flags`` bit 0 says the ids of a PULL are already unique. Messages between one worker and one
server stay in order, so a PUSH needs no ids: the server remembers the ids of that step's PULL.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import torch

from tessera_ml.comm.base import Communicator, Work


class Kind(IntEnum):
    PULL = 1
    LOOKUP = 2
    PUSH = 3
    STOP = 4


UNIQUE = 1
HEADER_LEN = 4


@dataclass(frozen=True)
class Header:
    kind: Kind
    step: int
    count: int
    flags: int = 0

    def tensor(self) -> torch.Tensor:
        return torch.tensor([int(self.kind), self.step, self.count, self.flags], dtype=torch.int64)

    @classmethod
    def parse(cls, t: torch.Tensor) -> Header:
        kind, step, count, flags = (int(v) for v in t.tolist())
        return cls(Kind(kind), step, count, flags)


def recv_header(comm: Communicator, src: int) -> Header:
    buf = torch.empty(HEADER_LEN, dtype=torch.int64)
    comm.recv(buf, src)
    return Header.parse(buf)


def send_request(
    comm: Communicator, dst: int, header: Header, payload: torch.Tensor | None
) -> list[Work]:
    """Post a header and its payload without waiting; wait on the returned work later."""
    works = [comm.isend(header.tensor(), dst)]
    if payload is not None and payload.numel():
        works.append(comm.isend(payload.contiguous(), dst))
    return works
