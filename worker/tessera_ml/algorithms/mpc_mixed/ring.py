"""Rings Z_2^32 and Z_2^64 on torch integer tensors, with fixed-point encoding.

Shares live in ``torch.int32`` (Z_2^32) or ``torch.int64`` (Z_2^64); addition, subtraction and
multiplication wrap around modulo 2^bits, which is exactly the ring arithmetic. A real value v is
encoded as round(v * 2^frac) in two's complement.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Ring:
    """Z_2^bits with ``frac`` fractional bits of fixed-point precision."""

    bits: int
    frac: int

    def __post_init__(self) -> None:
        if self.bits not in (32, 64):
            raise ValueError(f"ring must be Z_2^32 or Z_2^64, not Z_2^{self.bits}")
        # a product carries 2 * frac fractional bits and must stay below 2^(bits - 2)
        if not 0 <= self.frac <= self.bits // 2 - 2:
            raise ValueError(f"{self.frac} fractional bits do not fit Z_2^{self.bits}")

    @property
    def dtype(self) -> torch.dtype:
        return torch.int32 if self.bits == 32 else torch.int64

    @property
    def element_bytes(self) -> int:
        return self.bits // 8

    @property
    def scale(self) -> int:
        return 1 << self.frac

    def encode(self, values: torch.Tensor) -> torch.Tensor:
        """Fixed-point encoding of real values (must lie within the ring's signed range)."""
        scaled = torch.round(values.to(torch.float64) * self.scale)
        limit = float(2 ** (self.bits - 1))
        if scaled.numel() and (scaled.abs().max().item() >= limit):
            raise ValueError(f"value out of range of Z_2^{self.bits} at {self.frac} bits")
        return scaled.to(torch.int64).to(self.dtype)

    def decode(self, encoded: torch.Tensor, frac: int | None = None) -> torch.Tensor:
        return encoded.to(torch.float64) / float(1 << (self.frac if frac is None else frac))

    def encode_int(self, value: int) -> int:
        """A Python integer reduced into the ring's signed representation."""
        value &= (1 << self.bits) - 1
        return value - (1 << self.bits) if value >= 1 << (self.bits - 1) else value

    def random(self, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        """Uniform ring elements: every value of the ring's dtype, one draw each."""
        out = torch.empty(shape, dtype=self.dtype)
        # no upper bound: up to the dtype's largest value, inclusive
        return out.random_(-(2 ** (self.bits - 1)), None, generator=generator)

    def msb(self, x: torch.Tensor) -> torch.Tensor:
        """Top bit of each element as 0/1 in the ring's dtype."""
        return ((x >> (self.bits - 1)) & 1).to(self.dtype)

    def high_bits(self, x: torch.Tensor, shift: int) -> torch.Tensor:
        """Logical right shift: x viewed as unsigned, divided by 2^shift."""
        if shift == 0:
            return x.clone()
        mask = (1 << (self.bits - shift)) - 1
        return (x >> shift) & mask

    def low_mask(self, count: int) -> int:
        """Integer with the lowest ``count`` bits set, in the ring's signed representation."""
        return self.encode_int((1 << count) - 1)


def to_ring(x: torch.Tensor, ring: Ring) -> torch.Tensor:
    """Reinterpret integers in another ring: the low bits when narrowing, sign-extended when
    widening. Used on shares only for reduction (narrowing is exact modulo 2^32)."""
    return x.to(ring.dtype)


RING32 = 32
RING64 = 64


def ring_sum(x: torch.Tensor, dim: int, keepdim: bool = False) -> torch.Tensor:
    """Sum that stays in the ring (torch would widen int32 sums to int64)."""
    return x.sum(dim, keepdim=keepdim, dtype=x.dtype)
