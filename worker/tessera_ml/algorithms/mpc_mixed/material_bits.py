"""Material for XOR-shared bits: the comparison's masks, chunk tables and AND gates, and the
random bits that let a secret bit multiply additive shares."""

from __future__ import annotations

import math
from functools import cache

import torch

from tessera_ml.algorithms.mpc_mixed import comparison
from tessera_ml.algorithms.mpc_mixed.comparison import (
    CHUNK_BITS,
    CHUNKS_PER_BYTE,
    table_words,
    tree_levels,
)
from tessera_ml.algorithms.mpc_mixed.material_kind import (
    Masks,
    MaterialKind,
    Slot,
    arithmetic,
    dtype_of,
    ring_of,
)
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.algorithms.mpc_mixed.ring import Ring


class Compare(MaterialKind):
    """r, msb(r) (XOR) and the per-chunk ``less`` tables of r's low bits (the parties derive
    the ``equal`` tables from them), then what combines the chunks:
    per level of the tree, AND triples on ring words; per level of ``fan_in``, the factors'
    masks and the ANDs of their subsets."""

    kind = Kind.COMPARE

    def layout(self, req: Request) -> list[Slot]:
        s = req.shape
        table = Slot((*s, table_words(req.bits)), torch.int64, True)
        slots = [arithmetic(s, req.bits), Slot(s, torch.uint8, True), table]
        if not req.fan_in:
            gates = 3 * tree_levels(req.bits)
            return slots + [Slot(s, dtype_of(req.bits), True)] * gates
        words = comparison.words_for(math.prod(s))
        for level in comparison.levels(req.bits):
            shapes = comparison.level_shapes(level, words)
            slots += [Slot(shape, torch.int64, True) for shape in shapes]
        return slots

    def free(self, req: Request) -> list[int]:
        out, index = [0], 3  # r, then after msb(r) and the table what combines the chunks
        if req.fan_in:
            words = comparison.words_for(math.prod(req.shape))
            for level in comparison.levels(req.bits):
                out.append(index)  # the level's masks; the ANDs of their subsets follow
                index += len(comparison.level_shapes(level, words))
            return out
        for _ in range(tree_levels(req.bits)):
            out += [index, index + 1]  # a gate's two masks; their AND follows
            index += 3
        return out

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        ring, s = ring_of(req), req.shape
        r = masks.ring(ring, s)
        less = _less_tables(r & ((1 << (req.bits - 1)) - 1), req.bits)
        out = [r, ring.msb(r).to(torch.uint8), less]
        if req.fan_in:
            words = comparison.words_for(math.prod(s))
            for fan_in_level in comparison.levels(req.bits):
                out += comparison.level_material(fan_in_level, words, masks.take)
            return out
        for _ in range(tree_levels(req.bits)):
            a, b = masks.ring(ring, s), masks.ring(ring, s)
            out += [a, b, a & b]
        return out


class Select(MaterialKind):
    """A random bit b (XOR), and per use in a ring: b there, a and a * b."""

    kind = Kind.SELECT

    def layout(self, req: Request) -> list[Slot]:
        slots = [Slot(req.shape, torch.uint8, True)]
        for bits in req.uses:
            slots += [arithmetic(req.shape, bits)] * 3
        return slots

    def free(self, req: Request) -> list[int]:
        return [0] + [2 + 3 * use for use in range(len(req.uses))]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        bit = masks.bits(req.shape)
        out = [bit]
        for bits in req.uses:
            use_ring = Ring(bits, 0)
            b = bit.to(use_ring.dtype)
            a = masks.ring(use_ring, req.shape)
            out += [b, a, a * b]
        return out


def _less_tables(r_low: torch.Tensor, bits: int) -> torch.Tensor:
    """Per chunk j of r, bit v of table j is [chunk > v]; table j starts at bit
    j * 2^CHUNK_BITS of the packed words.

    A byte of r holds two chunks, whose tables are 32 bits of the packed words that depend on
    that byte alone (``_tables_of_byte``); read byte by byte, they lie in memory in the words'
    order (little-endian, as ``comparison.lookup`` reads them).
    """
    ring_bits = r_low.to(dtype_of(bits)).contiguous()
    places = ring_bits.unsqueeze(-1).view(torch.uint8).reshape(-1).to(torch.int32)
    tables = _tables_of_byte().index_select(0, places).view(torch.int64)
    return tables.view(*r_low.shape, table_words(bits))


@cache
def _tables_of_byte() -> torch.Tensor:
    """For every value of a byte, the tables of its chunks packed into an int32 word: for a
    chunk value c the table is the c bits below bit c, (1 << c) - 1, shifted into the chunk's
    place (the tables sharing a word are disjoint, so adding them packs them)."""
    size = 1 << CHUNK_BITS
    byte = torch.arange(256, dtype=torch.int32).unsqueeze(-1)
    values = (byte >> (torch.arange(CHUNKS_PER_BYTE, dtype=torch.int32) * CHUNK_BITS)) & (size - 1)
    place = torch.arange(CHUNKS_PER_BYTE, dtype=torch.int32) * size
    return (((torch.ones_like(values) << values) - 1) << place).sum(-1, dtype=torch.int32)


BIT_MATERIALS = (Compare(), Select())
