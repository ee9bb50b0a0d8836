"""What a compute party asks the dealer for: one ``Request`` per item of material, and its
fixed-size wire form (party 1 sends it to the dealer rank while a phase is recorded)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import torch


class Kind(IntEnum):
    MUL = 1  # a, b, a*b (broadcasting)
    MATMUL = 2  # a, b, a@b
    SQUARE = 3  # a, a*a
    TRUNC = 4  # r, r >> d (logical), msb(r)
    EXTEND = 5  # r in Z_2^32, r as an integer >> d in Z_2^64, msb(r) in Z_2^64
    COMPARE = 6  # r, msb(r) (XOR), per-chunk tables of r, then the tree's AND triples or,
    # for the fan_in comparison, per level the factors' masks and the ANDs of their subsets
    SELECT = 7  # a random bit b (XOR), and per use in a ring: b, a, a*b
    NORM = 8  # batch-norm masks and their products, each value opened once per step
    MATMUL_PAIR = 10  # a, b, a@b, d, b@d: x @ y and y @ w with y opened once
    WIDE_MUL = 11  # extension masks of x and y (or x alone, a square) and their Z_2^64 products
    WIDE_MATMUL = 12  # extension mask of x (n, k), mask b of w (k, j), R @ b, msb(r)_ik b_kj
    PRODUCT = 13  # masks of n factors (XOR bits for bit factors), products of every subset


MAX_FACTORS = 6
"""Factors of one PRODUCT item: the dealer shares 2^n - 1 products of masks."""

SHIFTED = (Kind.TRUNC, Kind.EXTEND)
"""The kinds whose material depends on a shift."""


@dataclass(frozen=True)
class Request:
    """One item of material: its kind, ring (``bits``), the shape of the value it masks and,
    for two operands, of the other. Each kind takes at most one of the fields after ``other``:

    - ``shift``: TRUNC and EXTEND, the bits shifted out;
    - ``square``: WIDE_MUL, x * x rather than x * y;
    - ``fan_in``: COMPARE, the fan_in comparison rather than the tree;
    - ``bit_factors``: PRODUCT, per factor, whether it is an XOR-shared bit;
    - ``uses``: SELECT, the ring of each later multiplication by the bit.
    """

    kind: Kind
    bits: int
    shape: tuple[int, ...]
    other: tuple[int, ...] = ()
    shift: int = 0
    square: bool = False
    fan_in: bool = False
    bit_factors: tuple[bool, ...] = ()
    uses: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.kind == Kind.PRODUCT and not 1 <= len(self.bit_factors) <= MAX_FACTORS:
            raise ValueError(
                f"a product takes 1 to {MAX_FACTORS} factors, not {len(self.bit_factors)}"
            )

    def encode(self) -> torch.Tensor:
        """Fixed-size int64 wire form."""
        words = [int(self.kind), self.bits, self._param(), len(self.shape), *self.shape]
        words += [len(self.other), *self.other, len(self.uses), *self.uses]
        if len(words) > WIRE_WORDS:
            raise ValueError("request too large")
        return torch.tensor(words + [0] * (WIRE_WORDS - len(words)), dtype=torch.int64)

    @staticmethod
    def decode(wire: torch.Tensor) -> Request | None:
        """The request of ``encode``'s words; None for ``END``."""
        w = [int(v) for v in wire.tolist()]
        if w[0] == 0:
            return None
        kind, param = Kind(w[0]), w[2]
        n = w[3]
        shape = tuple(w[4 : 4 + n])
        m = w[4 + n]
        other = tuple(w[5 + n : 5 + n + m])
        k = w[5 + n + m]
        uses = tuple(w[6 + n + m : 6 + n + m + k])
        return Request(
            kind,
            w[1],
            shape,
            other,
            shift=param if kind in SHIFTED else 0,
            square=kind == Kind.WIDE_MUL and param == 1,
            fan_in=kind == Kind.COMPARE and param == _FAN_IN,
            bit_factors=_unpack_factors(param) if kind == Kind.PRODUCT else (),
            uses=uses,
        )

    def _param(self) -> int:
        """The wire's one parameter word, which holds the field this kind takes."""
        stray = (
            (self.shift and self.kind not in SHIFTED)
            or (self.square and self.kind != Kind.WIDE_MUL)
            or (self.fan_in and self.kind != Kind.COMPARE)
            or (self.bit_factors and self.kind != Kind.PRODUCT)
        )
        if stray:
            raise ValueError(f"{self} sets a field that a {self.kind.name} request does not take")
        if self.kind in SHIFTED:
            return self.shift
        if self.kind == Kind.WIDE_MUL:
            return int(self.square)
        if self.kind == Kind.COMPARE:
            return _FAN_IN if self.fan_in else _TREE
        if self.kind == Kind.PRODUCT:
            return _pack_factors(self.bit_factors)
        return 0


WIRE_WORDS = 24
END = torch.zeros(WIRE_WORDS, dtype=torch.int64)
"""Ends a recorded phase's requests."""

_TREE, _FAN_IN = 0, 1


def _pack_factors(bit_factors: tuple[bool, ...]) -> int:
    """The factor count in the low byte, above it one bit per factor that is a bit."""
    mask = sum(1 << i for i, is_bit in enumerate(bit_factors) if is_bit)
    return len(bit_factors) | mask << 8


def _unpack_factors(param: int) -> tuple[bool, ...]:
    return tuple(bool(param >> (8 + i) & 1) for i in range(param & 0xFF))
