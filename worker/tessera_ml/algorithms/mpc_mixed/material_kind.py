"""What every kind of dealer item has: the tensors a party receives, and the dealer's values."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import torch

from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.algorithms.mpc_mixed.ring import Ring


@dataclass(frozen=True)
class Slot:
    """One tensor of an item: an additive share, or an XOR share if ``binary``."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    binary: bool


class Masks(ABC):
    """Where a kind's ``draw`` takes its masks: the uniform values its item holds as they are
    (a Beaver triple's a and b, a truncation's r), one ``take`` per slot of ``free``, in that
    order. The dealer hands out masks whose party-1 share comes from a seed party 1 holds, so
    only the other slots cross the network."""

    @abstractmethod
    def take(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """The next mask: uniform over ``dtype`` (0/1 for ``torch.uint8``)."""

    def ring(self, ring: Ring, shape: tuple[int, ...]) -> torch.Tensor:
        return self.take(tuple(shape), ring.dtype)

    def bits(self, shape: tuple[int, ...]) -> torch.Tensor:
        return self.take(tuple(shape), torch.uint8)


class MaterialKind(ABC):
    """One kind of item. ``layout`` and ``draw`` list the same tensors in the same order;
    ``free`` names the slots that ``draw`` fills with masks as they come from ``Masks``."""

    kind: ClassVar[Kind]

    @abstractmethod
    def layout(self, req: Request) -> list[Slot]:
        """The tensors each party receives."""

    @abstractmethod
    def free(self, req: Request) -> list[int]:
        """The slots holding masks as taken, in the order ``draw`` takes them."""

    @abstractmethod
    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        """The dealer's values, which the parties receive shares of."""


def dtype_of(bits: int) -> torch.dtype:
    return torch.int32 if bits == 32 else torch.int64


def ring_of(req: Request) -> Ring:
    """The request's ring; Z_2^64 for a request without one (SELECT)."""
    return Ring(req.bits if req.bits in (32, 64) else 64, 0)


def arithmetic(shape: tuple[int, ...], bits: int) -> Slot:
    """An additive share in Z_2^bits."""
    return Slot(shape, dtype_of(bits), False)
