"""Correlated randomness: what the dealer hands the two compute parties, item by item.

An item is described by a ``Request`` (kind, ring, shapes); its ``layout`` lists the tensors each
party receives, and ``secrets`` draws the dealer's values. A party's share of an arithmetic tensor
is additive in the ring; of a binary tensor (packed bits, or a 0/1 byte) it is an XOR share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

import torch

from tessera_ml.algorithms.mpc_mixed import comparison
from tessera_ml.algorithms.mpc_mixed.comparison import (
    CHUNK_BITS,
    FAN_IN_PARAM,
    compare_chunks,
    table_words,
    tree_levels,
)
from tessera_ml.algorithms.mpc_mixed.ring import Ring


class Kind(IntEnum):
    MUL = 1  # a, b, a*b (broadcasting)
    MATMUL = 2  # a, b, a@b
    SQUARE = 3  # a, a*a
    TRUNC = 4  # r, r >> d (logical), msb(r)
    EXTEND = 5  # r in Z_2^32, r as an integer >> d in Z_2^64, msb(r) in Z_2^64
    COMPARE = 6  # r, msb(r) (XOR), per-chunk tables of r, then the tree's AND triples or,
    # param FAN_IN_PARAM, per level the factors' masks and the ANDs of their subsets
    SELECT = 7  # a random bit b (XOR), and per use in a ring: b, a, a*b
    NORM = 8  # batch-norm masks and their products, each value opened once per step
    MATMUL_PAIR = 10  # a, b, a@b, d, b@d: x @ y and y @ w with y opened once
    WIDE_MUL = 11  # extension masks of x and y (or x alone, param 1) and their Z_2^64 products
    WIDE_MATMUL = 12  # extension mask of x (n, k), mask b of w (k, j), R @ b, msb(r)_ik b_kj
    PRODUCT = 13  # masks of n factors (XOR bits for bit factors), products of every subset


@dataclass(frozen=True)
class Slot:
    shape: tuple[int, ...]
    dtype: torch.dtype
    binary: bool


@dataclass(frozen=True)
class Request:
    """One item of material. ``uses`` (SELECT only) lists the ring of each later multiplication
    by the bit; ``param`` is the shift for TRUNC and EXTEND, 1 for a square in WIDE_MUL, the
    factors for PRODUCT (``product_request``), the comparison for COMPARE."""

    kind: Kind
    bits: int
    shape: tuple[int, ...]
    other: tuple[int, ...] = ()
    param: int = 0
    uses: tuple[int, ...] = ()

    def encode(self) -> torch.Tensor:
        """Fixed-size int64 wire form."""
        words = [int(self.kind), self.bits, self.param, len(self.shape), *self.shape]
        words += [len(self.other), *self.other, len(self.uses), *self.uses]
        if len(words) > WIRE_WORDS:
            raise ValueError("request too large")
        return torch.tensor(words + [0] * (WIRE_WORDS - len(words)), dtype=torch.int64)

    @staticmethod
    def decode(wire: torch.Tensor) -> Request | None:
        w = [int(v) for v in wire.tolist()]
        if w[0] == 0:
            return None
        n = w[3]
        shape = tuple(w[4 : 4 + n])
        m = w[4 + n]
        other = tuple(w[5 + n : 5 + n + m])
        k = w[5 + n + m]
        uses = tuple(w[6 + n + m : 6 + n + m + k])
        return Request(Kind(w[0]), w[1], shape, other, w[2], uses)


WIRE_WORDS = 24
END = torch.zeros(WIRE_WORDS, dtype=torch.int64)


def _dtype(bits: int) -> torch.dtype:
    return torch.int32 if bits == 32 else torch.int64


MAX_FACTORS = 6


def product_request(bits: int, shape: tuple[int, ...], bit_factors: list[bool]) -> Request:
    """A PRODUCT item: ``param`` holds the factor count and, above it, which factors are bits."""
    n = len(bit_factors)
    if not 1 <= n <= MAX_FACTORS:
        raise ValueError(f"a product takes 1 to {MAX_FACTORS} factors, not {n}")
    mask = sum(1 << i for i, is_bit in enumerate(bit_factors) if is_bit)
    return Request(Kind.PRODUCT, bits, shape, param=n | mask << 8)


def product_factors(req: Request) -> tuple[int, list[bool]]:
    n = req.param & 0xFF
    return n, [bool(req.param >> (8 + i) & 1) for i in range(n)]


def layout(req: Request) -> list[Slot]:
    dt = _dtype(req.bits)
    s = req.shape
    if req.kind == Kind.MUL:
        out = torch.broadcast_shapes(req.shape, req.other)
        return [Slot(s, dt, False), Slot(req.other, dt, False), Slot(tuple(out), dt, False)]
    if req.kind == Kind.MATMUL:
        prod = (*s[:-1], req.other[-1])
        return [Slot(s, dt, False), Slot(req.other, dt, False), Slot(prod, dt, False)]
    if req.kind == Kind.MATMUL_PAIR:
        o = req.other
        shapes = [s, o, (s[0], o[-1]), (o[-1], s[0]), (o[0], s[0])]
        return [Slot(shape, dt, False) for shape in shapes]
    if req.kind == Kind.WIDE_MUL:
        if req.param == 1:
            return [*_extension_slots(s), Slot(s, torch.int64, False), Slot(s, torch.int64, False)]
        pair = _extension_slots((2, *s))
        return [*pair, Slot(s, torch.int64, False), Slot((2, *s), torch.int64, False)]
    if req.kind == Kind.WIDE_MATMUL:
        n, k, j = s[0], s[1], req.other[-1]
        mask = _extension_slots(s)
        return [
            *mask,
            Slot(req.other, torch.int64, False),
            Slot((n, j), torch.int64, False),
            Slot((n, k, j), torch.int32, False),
        ]
    if req.kind == Kind.SQUARE:
        return [Slot(s, dt, False), Slot(s, dt, False)]
    if req.kind == Kind.TRUNC:
        return [Slot(s, dt, False)] * 3
    if req.kind == Kind.EXTEND:
        return _extension_slots(s)
    if req.kind == Kind.COMPARE:
        table = Slot((*s, table_words(req.bits)), torch.int64, True)
        slots = [Slot(s, dt, False), Slot(s, torch.uint8, True), table, table]
        if req.param != FAN_IN_PARAM:
            return slots + [Slot(s, dt, True)] * (5 * (tree_levels(req.bits) - 1) + 3)
        words = comparison.words_for(math.prod(s))
        for level in comparison.levels(req.bits):
            shapes = comparison.level_shapes(level, words)
            slots += [Slot(shape, torch.int64, True) for shape in shapes]
        return slots
    if req.kind == Kind.NORM:
        vec = (s[-1],)
        return (
            [Slot(s, dt, False), Slot(vec, dt, False), Slot(s, dt, False)]
            + [Slot(vec, dt, False)]
            + [Slot(s, dt, False)] * 5
        )
    if req.kind == Kind.PRODUCT:
        n, bit_factors = product_factors(req)
        slots = [Slot(s, torch.uint8, True)] * sum(bit_factors)
        return slots + [Slot(s, dt, False)] * ((1 << n) - 1)
    if req.kind == Kind.SELECT:
        slots = [Slot(s, torch.uint8, True)]
        for bits in req.uses:
            slots += [Slot(s, _dtype(bits), False)] * 3
        return slots
    raise ValueError(f"unknown material kind {req.kind}")


def secrets(req: Request, gen: torch.Generator) -> list[torch.Tensor]:
    """The dealer's values for one item, in ``layout`` order."""
    ring = Ring(req.bits if req.bits in (32, 64) else 64, 0)
    s = req.shape
    if req.kind in (Kind.MUL, Kind.MATMUL):
        a, b = ring.random(s, gen), ring.random(req.other, gen)
        return [a, b, a * b if req.kind == Kind.MUL else a @ b]
    if req.kind == Kind.MATMUL_PAIR:
        a, b = ring.random(s, gen), ring.random(req.other, gen)
        d = ring.random((req.other[-1], s[0]), gen)
        return [a, b, a @ b, d, b @ d]
    if req.kind == Kind.WIDE_MUL:
        # r in Z_2^32, r as an unsigned integer and msb(r), in Z_2^64
        if req.param == 1:
            r_x, big_x, m_x = _extension_mask(s, gen)
            return [r_x, big_x, m_x, big_x * big_x, big_x * m_x]
        # x's and y's masks stacked; R_x R_y, and (R_x m_y, R_y m_x)
        r, big, m = _extension_mask((2, *s), gen)
        return [r, big, m, big[0] * big[1], big * m.flip(0)]
    if req.kind == Kind.WIDE_MATMUL:
        r, big, m = _extension_mask(s, gen)
        b = Ring(64, 0).random(req.other, gen)
        # m_ik b_kj is needed modulo 2^32 only: its term carries 2^32
        return [r, big, m, b, big @ b, (m.unsqueeze(-1) * b.unsqueeze(0)).to(torch.int32)]
    if req.kind == Kind.SQUARE:
        a = ring.random(s, gen)
        return [a, a * a]
    if req.kind == Kind.TRUNC:
        r = ring.random(s, gen)
        return [r, ring.high_bits(r, req.param), ring.msb(r)]
    if req.kind == Kind.EXTEND:
        r, unsigned, msb = _extension_mask(s, gen)
        return [r, unsigned >> req.param, msb]
    if req.kind == Kind.COMPARE:
        r = ring.random(s, gen)
        less, equal = _chunk_tables(r.to(torch.int64) & ((1 << (req.bits - 1)) - 1), req.bits)
        out = [r, ring.msb(r).to(torch.uint8), less, equal]
        if req.param == FAN_IN_PARAM:
            words = comparison.words_for(math.prod(s))
            for fan_in_level in comparison.levels(req.bits):
                out += comparison.level_material(fan_in_level, words, gen)
            return out
        levels = tree_levels(req.bits)
        for level in range(levels):
            last = level == levels - 1
            a, b1 = ring.random(s, gen), ring.random(s, gen)
            if last:
                out += [a, b1, a & b1]
            else:
                b2 = ring.random(s, gen)
                out += [a, b1, b2, a & b1, a & b2]
        return out
    if req.kind == Kind.NORM:
        # masks of: centred (B, F), scale (F), dy (B, F), k (F)
        a_c, a_s = ring.random(s, gen), ring.random((s[-1],), gen)
        a_d, a_k = ring.random(s, gen), ring.random((s[-1],), gen)
        return [a_c, a_s, a_d, a_k, a_c * a_c, a_c * a_s, a_d * a_c, a_d * a_s, a_c * a_k]
    if req.kind == Kind.PRODUCT:
        n, bit_factors = product_factors(req)
        bit_masks = [
            torch.randint(0, 2, s, dtype=torch.uint8, generator=gen) for b in bit_factors if b
        ]
        pending = iter(bit_masks)
        masks = [next(pending).to(ring.dtype) if b else ring.random(s, gen) for b in bit_factors]
        subsets = [torch.empty(0)] * (1 << n)
        for subset in range(1, 1 << n):
            low = (subset & -subset).bit_length() - 1
            rest = subset & (subset - 1)
            subsets[subset] = masks[low] if rest == 0 else subsets[rest] * masks[low]
        return [*bit_masks, *subsets[1:]]
    if req.kind == Kind.SELECT:
        bit = torch.randint(0, 2, s, dtype=torch.uint8, generator=gen)
        out = [bit]
        for bits in req.uses:
            use_ring = Ring(bits, 0)
            b = bit.to(use_ring.dtype)
            a = use_ring.random(s, gen)
            out += [b, a, a * b]
        return out
    raise ValueError(f"unknown material kind {req.kind}")


def _chunk_tables(r_low: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per chunk j of r, bit v of table j is [chunk > v] (``less``) or [chunk == v]
    (``equal``); table j starts at bit j * 2^CHUNK_BITS of the packed words."""
    chunks, size = compare_chunks(bits), 1 << CHUNK_BITS
    shifts = torch.arange(chunks, dtype=torch.int64) * CHUNK_BITS
    values = ((r_low.unsqueeze(-1) >> shifts) & (size - 1)).unsqueeze(-1)
    entries = torch.arange(size, dtype=torch.int64)

    def packed(table: torch.Tensor) -> torch.Tensor:
        return comparison.pack(table.flatten(-2).to(torch.int64))

    return packed(values > entries), packed(values == entries)


def _extension_slots(shape: tuple[int, ...]) -> list[Slot]:
    """Layout of ``_extension_mask``: r in Z_2^32, r unsigned and msb(r) in Z_2^64."""
    return [
        Slot(shape, torch.int32, False),
        Slot(shape, torch.int64, False),
        Slot(shape, torch.int64, False),
    ]


def _extension_mask(
    shape: tuple[int, ...], gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r = Ring(32, 0).random(shape, gen)
    unsigned = r.to(torch.int64) & 0xFFFFFFFF
    return r, unsigned, unsigned >> 31


def draw_share0(req: Request, prg: torch.Generator) -> list[torch.Tensor]:
    """Party 0's shares: pseudo-random from the seed it shares with the dealer."""
    out: list[torch.Tensor] = []
    for slot in layout(req):
        if slot.dtype == torch.uint8:
            out.append(torch.randint(0, 2, slot.shape, dtype=torch.uint8, generator=prg))
        else:
            out.append(Ring(32 if slot.dtype == torch.int32 else 64, 0).random(slot.shape, prg))
    return out


def split(
    req: Request, values: list[torch.Tensor], share0: list[torch.Tensor]
) -> list[torch.Tensor]:
    """Party 1's shares, given the secrets and party 0's shares."""
    return [
        v ^ s0 if slot.binary else v - s0
        for slot, v, s0 in zip(layout(req), values, share0, strict=True)
    ]
