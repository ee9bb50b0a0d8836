"""The combining half of secure comparison, in one round per level (``comparison="fan_in"``).

Comparing x >= 0 opens c = x + r and asks whether r > c on the low ``bits - 1`` bits. Split into
chunks of ``CHUNK_BITS`` bits (chunk 0 the lowest), the dealer's tables give XOR shares of
g_j = [r_j > c_j] and e_j = [r_j == c_j]; the answer is

    G = XOR_i  g_i AND e_(i+1) AND ... AND e_(k-1)

(the terms exclude each other, so XOR is OR). A level takes groups of m chunks and gives each
group its own (G, E = AND of its e's) in one round. Every factor f is opened masked, d = f XOR a,
and a monomial's AND expands as XOR over the subsets T of its factors of
(AND of d outside T) AND (AND of a inside T): the dealer shares the AND of the masks of every
subset of every monomial. All bits are packed 64 elements to an int64 word, so a round sends a
few bits per element.

``FAN_IN`` sets the levels per ring: the 8 chunks of Z_2^32 in one level, the 16 of Z_2^64 in two
of 4 (one level of 16 would need 2^16 mask products per element). The default comparison,
the tree of ``binary.Binary``, combines two chunks per level instead, on one XOR-shared ring
word per element that holds every chunk's g and e.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

CHUNK_BITS = 4
"""The dealer's tables cover this many bits of r at a time: a table of one chunk's 2^4 values
is 16 bits, which ``lookup`` reads as an int16."""

COMPARISONS = ("tree", "fan_in")

FAN_IN = {32: (8,), 64: (4, 4)}
"""Chunks combined per group at each level, lowest level first."""

WORD = 64


def compare_chunks(bits: int) -> int:
    """Chunks of CHUNK_BITS bits covering the low ``bits - 1`` bits that a comparison compares."""
    return -(-(bits - 1) // CHUNK_BITS)


def table_words(bits: int) -> int:
    """int64 words holding the 2^CHUNK_BITS-bit tables of all chunks, back to back."""
    return -(-(compare_chunks(bits) << CHUNK_BITS) // 64)


CHUNKS_PER_BYTE = 8 // CHUNK_BITS
"""Two: a byte of a ring element holds chunks 2k (its low half) and 2k + 1 (its high half)."""


def chunk_values(c: torch.Tensor, bits: int) -> torch.Tensor:
    """The public chunks of c's low ``bits - 1`` bits (..., chunks; uint8), lowest first, read
    from c's little-endian bytes: chunk 2k is byte k's low half, chunk 2k + 1 its high half (in
    both rings the chunks fill the element's bytes)."""
    low = (c & ((1 << (bits - 1)) - 1)).unsqueeze(-1).view(torch.uint8)
    halves = torch.stack([low & ((1 << CHUNK_BITS) - 1), low >> CHUNK_BITS], -1)
    return halves.view(*c.shape, -1)


def tree_word(g: torch.Tensor, e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The tree's ring word (``tree_places``) of the chunks' g and e (..., chunks; 0/1): each
    chunk's (g, e) is a nibble, two to a byte, and the bytes in order are the word's."""
    nibbles = (g | (e << TREE_E_BIT)).to(torch.uint8)
    pairs = nibbles[..., 0::2] | (nibbles[..., 1::2] << CHUNK_BITS)
    return pairs.contiguous().view(dtype).squeeze(-1)


def lookup(
    less: torch.Tensor, value: torch.Tensor, first: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """XOR shares of [chunk_j > v_j] and [chunk_j == v_j] (..., chunks; 0/1 int16) from XOR
    shares of the packed ``less`` tables (..., words) and the public chunk values ``value``
    (..., chunks). Table j is the j-th int16 of the little-endian words, so each bit is one
    shift of it. [chunk == v] = [chunk > v - 1] XOR [chunk > v], with [chunk > -1] = 1 added
    by the first party: linear over XOR, so the dealer sends only ``less``."""
    tables = less.view(torch.int16)[..., : value.shape[-1]]
    value = value.to(torch.int16)
    equal = tables ^ (tables << 1)
    if first:
        equal = equal ^ 1
    return (tables >> value) & 1, (equal >> value) & 1


def tree_levels(bits: int) -> int:
    """Levels of the tree comparison's prefix tree, two chunks per node."""
    return (compare_chunks(bits) - 1).bit_length()


TREE_E_BIT = 2
"""In the tree's ring word, chunk j's g sits at bit CHUNK_BITS * j and its e this many bits
above."""


@functools.cache
def tree_places(bits: int) -> tuple[int, int]:
    """The tree word's masks of the g bits and of the e bits (both below the sign bit)."""
    g_bits = sum(1 << (CHUNK_BITS * j) for j in range(compare_chunks(bits)))
    return g_bits, g_bits << TREE_E_BIT


def words_for(count: int) -> int:
    """Packed words holding one bit of each of ``count`` elements."""
    return -(-count // WORD)


@dataclass(frozen=True)
class Level:
    """Groups of ``fan_in`` chunks, each giving G and, below the top level, E."""

    fan_in: int
    groups: int
    need_e: bool


def levels(bits: int) -> list[Level]:
    fan_ins = FAN_IN[bits]
    chunks = compare_chunks(bits)
    out = []
    for i, m in enumerate(fan_ins):
        if chunks % m:
            raise ValueError(f"{chunks} chunks do not split into groups of {m}")
        chunks //= m
        out.append(Level(m, chunks, need_e=i < len(fan_ins) - 1))
    if chunks != 1:
        raise ValueError(f"the levels of Z_2^{bits} leave {chunks} groups, not one")
    return out


@dataclass(frozen=True)
class _Plan:
    """Index arithmetic of one level's round, the same for every group.

    Factors are numbered by their row in the group's (g_0 .. g_(m-1), e_0 .. e_(m-1)) and only
    those some monomial uses are opened (``rows``). ``family`` lists, as bitmasks over the
    opened factors, every subset of a monomial, by size (the empty set first); ``layers`` builds
    the AND of each from a smaller one and one factor; ``pairs`` lists, per output, the
    (family index of the factors outside T, family index of T) of every term, padded to a power
    of two with a term that is zero."""

    rows: tuple[int, ...]
    family: tuple[int, ...]
    layers: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    outer: torch.Tensor
    inner: torch.Tensor
    outputs: int
    terms: int


@functools.cache
def plan(fan_in: int, need_e: bool) -> _Plan:
    m = fan_in
    # monomials over the rows g_i = i, e_j = m + j
    g_terms = [(1 << i) | sum(1 << (m + j) for j in range(i + 1, m)) for i in range(m)]
    outputs = [g_terms] + ([[sum(1 << (m + j) for j in range(m))]] if need_e else [])
    used = functools.reduce(lambda a, b: a | b, (t for out in outputs for t in out))
    rows = tuple(r for r in range(2 * m) if used >> r & 1)
    position = {r: i for i, r in enumerate(rows)}

    def compact(term: int) -> int:
        return sum(1 << position[r] for r in rows if term >> r & 1)

    monomials = [[compact(t) for t in out] for out in outputs]
    subsets = {0}
    for out in monomials:
        for term in out:
            sub = term
            while sub:
                subsets.add(sub)
                sub = (sub - 1) & term
    family = tuple(sorted(subsets, key=lambda s: (s.bit_count(), s)))
    index = {s: i for i, s in enumerate(family)}
    layers = []
    for size in range(1, max(s.bit_count() for s in family) + 1):
        members = [s for s in family if s.bit_count() == size]
        rest = [index[s & (s - 1)] for s in members]
        low = [(s & -s).bit_length() - 1 for s in members]
        layers.append((torch.tensor(rest), torch.tensor(low)))
    counts = [sum(1 << t.bit_count() for t in out) for out in monomials]
    terms = 1 << (max(counts) - 1).bit_length()
    zero = len(family)  # a row of zeros after the family's products
    outer: list[int] = []
    inner: list[int] = []
    for out in monomials:
        for term in out:
            sub = term
            while True:
                outer.append(index[term ^ sub])
                inner.append(index[sub])
                if sub == 0:
                    break
                sub = (sub - 1) & term
        pad = terms - (len(outer) % terms or terms)
        outer += [0] * pad
        inner += [zero] * pad
    return _Plan(
        rows,
        family,
        tuple(layers),
        torch.tensor(outer),
        torch.tensor(inner),
        len(monomials),
        terms,
    )


def _ands(masks: torch.Tensor, p: _Plan) -> torch.Tensor:
    """(groups, |family|, W): the AND of each family subset of ``masks`` (groups, factors, W),
    all ones for the empty set."""
    out = torch.full_like(masks[:, :1], -1)
    for rest, low in p.layers:
        out = torch.cat([out, out.index_select(1, rest) & masks.index_select(1, low)], 1)
    return out


def level_material(
    level: Level, words: int, take: Callable[[tuple[int, ...], torch.dtype], torch.Tensor]
) -> list[torch.Tensor]:
    """The dealer's values for one level: the factors' masks (uniform words from ``take``) and
    the AND of every family subset of them (the empty one left out), packed."""
    p = plan(level.fan_in, level.need_e)
    masks = take((level.groups, len(p.rows), words), torch.int64)
    return [masks, _ands(masks, p)[:, 1:]]


def level_shapes(level: Level, words: int) -> list[tuple[int, ...]]:
    p = plan(level.fan_in, level.need_e)
    return [(level.groups, len(p.rows), words), (level.groups, len(p.family) - 1, words)]


def factors(level: Level, g: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """The level's factors (groups, opened factors, W) from this party's g and e shares
    (chunks, W), chunk-major and lowest chunk first."""
    m = level.fan_in
    rows = torch.cat([g.view(level.groups, m, -1), e.view(level.groups, m, -1)], 1)
    return rows[:, list(plan(m, level.need_e).rows)]


def combine(
    level: Level, opened: torch.Tensor, products: torch.Tensor, first: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """This party's shares of each group's G and E (groups, W) from the opened factors and its
    shares of the mask products (E is all zeros at the top level)."""
    p = plan(level.fan_in, level.need_e)
    public = _ands(opened, p)
    ones = torch.full_like(products[:, :1], -1 if first else 0)
    masks = torch.cat([ones, products, torch.zeros_like(ones)], 1)
    terms = public.index_select(1, p.outer) & masks.index_select(1, p.inner)
    terms = terms.view(level.groups, p.outputs, p.terms, -1)
    while terms.shape[2] > 1:
        half = terms.shape[2] // 2
        terms = terms[:, :, :half] ^ terms[:, :, half:]
    g = terms[:, 0, 0]
    e = terms[:, 1, 0] if level.need_e else torch.zeros_like(g)
    return g, e


def pack(bits: torch.Tensor) -> torch.Tensor:
    """(rows, n) 0/1 int64 -> (rows, W) words, element i at bit i % 64 of word i // 64."""
    n = bits.shape[-1]
    padded = torch.nn.functional.pad(bits, (0, words_for(n) * WORD - n))
    shifts = torch.arange(WORD, dtype=torch.int64)
    return (padded.view(*bits.shape[:-1], -1, WORD) << shifts).sum(-1)


def unpack(words: torch.Tensor, n: int) -> torch.Tensor:
    """(W,) words -> (n,) 0/1 uint8."""
    shifts = torch.arange(WORD, dtype=torch.int64)
    return ((words.unsqueeze(-1) >> shifts) & 1).reshape(-1)[:n].to(torch.uint8)
