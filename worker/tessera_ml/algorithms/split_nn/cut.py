"""One side of a cut: a point-to-point link to a peer rank carrying ``[rows, dim]`` tensors.

Shapes, dtype and codec are agreed once when the link opens (``agree``); afterwards only the
encoded tensors cross the wire. Sends and receives can be blocking (sequential schedule) or
posted ahead and waited for later (pipelined schedule).
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any

import torch

from tessera_ml.algorithms.split_nn.codecs import Codec
from tessera_ml.comm.base import Communicator, Work
from tessera_ml.errors import CodedError


class CutError(CodedError):
    """The two sides of a cut disagree on what crosses it."""


@dataclass(frozen=True)
class CutShape:
    dim: int
    dtype: str
    codec: str


def send_shape(comm: Communicator, peer: int, shape: CutShape) -> None:
    comm.send_data((shape.dim, shape.dtype, shape.codec), peer)


def recv_shape(comm: Communicator, peer: int, *, dtype: str, codec: str) -> CutShape:
    dim, their_dtype, their_codec = comm.recv_data(peer)
    if their_dtype != dtype or their_codec != codec:
        raise CutError(
            "cut_mismatch",
            f"rank {peer} sends {their_dtype}/{their_codec}, this rank expects {dtype}/{codec}",
        )
    return CutShape(int(dim), dtype, codec)


@dataclass
class Pending:
    """A posted receive; ``wait`` returns the decoded tensor."""

    link: Link
    wire: list[torch.Tensor]
    works: list[Work]

    def wait(self) -> torch.Tensor:
        self.arrive()
        return self.link.codec.decode([b.to(self.link.device) for b in self.wire], self.link.dtype)

    def arrive(self) -> None:
        """Block until the wire tensors are here, without decoding them (a receive's work may
        be waited for only once, so later calls return at once)."""
        for w in self.works:
            w.wait()
        self.works = []


class Arrivals:
    """Reports, in arrival order, which posted receives have completed.

    One watcher thread per stream waits on that stream's receives in posting order and queues
    ``(stream, index)`` when receive group ``index`` is complete; ``next()`` returns the next
    event. This lets a rank work on whichever micro-batch is ready first.
    """

    def __init__(self, streams: dict[str, list[list[Pending]]]) -> None:
        self._events: queue.Queue[tuple[str, int] | BaseException] = queue.Queue()
        self._threads = [
            threading.Thread(target=self._watch, args=(name, groups), daemon=True)
            for name, groups in streams.items()
        ]
        for t in self._threads:
            t.start()

    def _watch(self, name: str, groups: list[list[Pending]]) -> None:
        try:
            for index, group in enumerate(groups):
                for pending in group:
                    pending.arrive()
                self._events.put((name, index))
        except BaseException as exc:  # handed to the training thread, which raises it
            self._events.put(exc)

    def next(self) -> tuple[str, int]:
        event = self._events.get()
        if isinstance(event, BaseException):
            raise event
        return event

    def join(self) -> None:
        for t in self._threads:
            t.join()


@dataclass
class Link:
    comm: Communicator
    peer: int
    dim: int
    codec: Codec
    dtype: torch.dtype
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    wire_device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    _in_flight: list[tuple[Work, Any]] = field(default_factory=list)

    def send(self, t: torch.Tensor, *, blocking: bool) -> None:
        if t.shape[1] != self.dim:
            raise CutError(
                "cut_shape", f"tensor of width {t.shape[1]} on a cut of width {self.dim}"
            )
        for part in self.codec.encode(t):
            part = part.to(self.wire_device)
            if blocking:
                self.comm.send(part, self.peer)
            else:
                self._in_flight.append((self.comm.isend(part, self.peer), part))

    def post_recv(self, rows: int) -> Pending:
        wire = [b.to(self.wire_device) for b in self.codec.buffers(rows, self.dim, self.dtype)]
        return Pending(self, wire, [self.comm.irecv(b, self.peer) for b in wire])

    def recv(self, rows: int) -> torch.Tensor:
        wire = [b.to(self.wire_device) for b in self.codec.buffers(rows, self.dim, self.dtype)]
        for b in wire:
            self.comm.recv(b, self.peer)
        return self.codec.decode([b.to(self.device) for b in wire], self.dtype)

    def flush(self) -> None:
        """Wait until every posted send has left."""
        for work, _ in self._in_flight:
            work.wait()
        self._in_flight.clear()

    def wire_bytes(self, rows: int) -> int:
        return self.codec.wire_bytes(rows, self.dim, self.dtype)
