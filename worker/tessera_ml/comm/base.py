"""The communicator interface every algorithm talks through, with byte accounting.

Point-to-point transfers are counted exactly (tensor bytes). Collectives are counted with the
bytes a ring implementation moves per rank (documented on each method), attributed to the
group; the network testbed reads real interface counters when exact wire bytes matter.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch

from tessera_ml.comm import codec

ReduceOp = Literal["sum", "max", "min", "avg"]


class Work(Protocol):
    def wait(self) -> Any: ...


@dataclass(frozen=True)
class Group:
    """A set of global ranks that run collectives together."""

    name: str
    ranks: tuple[int, ...]
    handle: Any = field(default=None, compare=False, hash=False, repr=False)

    @property
    def size(self) -> int:
        return len(self.ranks)

    def index(self, global_rank: int) -> int:
        """Position of a global rank inside the group."""
        return self.ranks.index(global_rank)


@dataclass
class ByteStats:
    """Bytes sent and received by this rank, by peer rank and by group name."""

    sent_to: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    recv_from: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    group_sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    group_recv: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    messages_sent: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def sent(self) -> int:
        return sum(self.sent_to.values()) + sum(self.group_sent.values())

    @property
    def received(self) -> int:
        return sum(self.recv_from.values()) + sum(self.group_recv.values())

    def add_p2p(self, peer: int, *, sent: int = 0, received: int = 0) -> None:
        with self._lock:
            if sent:
                self.sent_to[peer] += sent
                self.messages_sent += 1
            if received:
                self.recv_from[peer] += received

    def add_group(self, group: str, *, sent: int = 0, received: int = 0) -> None:
        with self._lock:
            self.group_sent[group] += sent
            self.group_recv[group] += received

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "sent": self.sent,
                "received": self.received,
                "sent_to": dict(self.sent_to),
                "recv_from": dict(self.recv_from),
                "group_sent": dict(self.group_sent),
                "group_recv": dict(self.group_recv),
                "messages_sent": self.messages_sent,
            }

    def metrics(self) -> dict[str, float]:
        """The cumulative counters under the metric names of ``docs/metrics.md``."""
        snap = self.snapshot()
        values = {"bytes_sent": float(snap["sent"]), "bytes_received": float(snap["received"])}
        values.update({f"bytes_sent.to.{p}": float(v) for p, v in snap["sent_to"].items()})
        values.update({f"bytes_sent.group.{g}": float(v) for g, v in snap["group_sent"].items()})
        return values

    def reset(self) -> None:
        with self._lock:
            self.sent_to.clear()
            self.recv_from.clear()
            self.group_sent.clear()
            self.group_recv.clear()
            self.messages_sent = 0


MAX_DATA_BYTES = 1 << 30
"""The largest plain-data message a rank accepts: a peer cannot make it allocate more."""


def check_announced(sizes: Sequence[int], ranks: Sequence[int]) -> None:
    """Refuse, before anything is allocated, sizes of plain data that peers announced outside
    0..``MAX_DATA_BYTES`` (``codec.DecodeError`` naming the ranks)."""
    bad = [r for r, n in zip(ranks, sizes, strict=True) if not 0 <= n <= MAX_DATA_BYTES]
    if bad:
        raise codec.DecodeError(
            f"ranks {bad} announced data outside 0..{MAX_DATA_BYTES} bytes; nothing was read"
        )


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Communicator(ABC):
    """Point-to-point and collective operations among the ranks of one job.

    ``group=None`` means the whole world. ``new_group`` is collective: every rank of the world
    must call it with the same arguments in the same order.
    """

    rank: int
    world_size: int
    stats: ByteStats
    device: torch.device = torch.device("cpu")
    """Where tensors handed to this communicator must live (a CUDA device under NCCL)."""

    @property
    @abstractmethod
    def world(self) -> Group: ...

    @abstractmethod
    def new_group(self, ranks: Sequence[int], name: str) -> Group: ...

    # point-to-point: exact bytes per peer
    @abstractmethod
    def send(self, tensor: torch.Tensor, dst: int) -> None: ...

    @abstractmethod
    def recv(self, tensor: torch.Tensor, src: int) -> None: ...

    @abstractmethod
    def isend(self, tensor: torch.Tensor, dst: int) -> Work: ...

    @abstractmethod
    def irecv(self, tensor: torch.Tensor, src: int) -> Work: ...

    # collectives: ring-model bytes per group
    @abstractmethod
    def all_reduce(
        self, tensor: torch.Tensor, op: ReduceOp = "sum", group: Group | None = None
    ) -> None:
        """In place. Counted as 2(n-1)/n x tensor bytes sent and received."""

    @abstractmethod
    def all_gather(self, tensor: torch.Tensor, group: Group | None = None) -> list[torch.Tensor]:
        """Returns one tensor per group member (same shape). Counted as (n-1) x tensor bytes."""

    @abstractmethod
    def broadcast(self, tensor: torch.Tensor, src: int, group: Group | None = None) -> None:
        """In place from global rank ``src``. Root counted (n-1) x bytes sent, others received."""

    @abstractmethod
    def barrier(self, group: Group | None = None) -> None: ...

    @abstractmethod
    def all_gather_data(self, obj: Any, group: Group | None = None) -> list[Any]:
        """Plain data (``codec``) from every group member, small metadata only.

        Counted as (n-1) x encoded size sent and received.
        """

    def send_data(self, obj: Any, dst: int) -> None:
        """Plain data (``codec``) to one peer: its length, then the encoded bytes (two messages)."""
        payload = as_tensor(codec.encode(obj)).to(self.device)
        self.send(torch.tensor([payload.numel()], dtype=torch.int64, device=self.device), dst)
        self.send(payload, dst)

    def recv_data(self, src: int) -> Any:
        """What ``send_data`` sent; ``codec.DecodeError`` if the bytes are not plain data."""
        length = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.recv(length, src)
        size = int(length.item())
        check_announced([size], [src])
        payload = torch.empty(size, dtype=torch.uint8, device=self.device)
        self.recv(payload, src)
        return codec.decode(payload.cpu().numpy().tobytes())

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; the default has none."""


def as_tensor(payload: bytes) -> torch.Tensor:
    """Encoded bytes as a uint8 tensor, the form they cross the wire in."""
    return torch.frombuffer(bytearray(payload), dtype=torch.uint8)
