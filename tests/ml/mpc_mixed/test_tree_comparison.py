"""The tree comparison's prefix circuit on chosen chunk patterns: every pattern of Z_2^32's 8
chunks, and Z_2^64's 16 with long runs of equal chunks at the top, which random values reach
too rarely to test the circuit's upper levels."""

from __future__ import annotations

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed.comparison import (
    CHUNK_BITS,
    TREE_E_BIT,
    chunk_values,
    compare_chunks,
    tree_word,
)
from tessera_ml.algorithms.mpc_mixed.local import run_two
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.algorithms.mpc_mixed.ring import Ring

GREATER, EQUAL, LESS = 0, 1, 2
"""Per chunk of r against c: r's chunk greater (g = 1), equal (e = 1) or less (neither)."""


def _borrow(patterns: torch.Tensor) -> torch.Tensor:
    """[r_low > c_low] by definition: the highest chunk that is not equal decides."""
    out = torch.zeros(patterns.shape[0], dtype=torch.uint8)
    decided = torch.zeros(patterns.shape[0], dtype=torch.bool)
    for j in reversed(range(patterns.shape[1])):
        here = ~decided & (patterns[:, j] != EQUAL)
        out[here] = (patterns[here, j] == GREATER).to(torch.uint8)
        decided |= here
    return out


def _words(patterns: torch.Tensor, ring: Ring) -> torch.Tensor:
    """The tree's word of each pattern: chunk j's g at bit CHUNK_BITS * j, its e above it."""
    at = torch.arange(patterns.shape[1], dtype=torch.int64) * CHUNK_BITS
    g = (patterns == GREATER).to(torch.int64) << at
    e = (patterns == EQUAL).to(torch.int64) << (at + TREE_E_BIT)
    return (g | e).sum(-1).to(ring.dtype)


def _secure_borrow(patterns: torch.Tensor, ring: Ring) -> torch.Tensor:
    word = _words(patterns, ring)
    gen = torch.Generator().manual_seed(ring.bits)
    mask = ring.random(tuple(word.shape), gen)

    def body(eng: Engine, share: torch.Tensor) -> torch.Tensor:
        item = eng.provider.get(Request(Kind.COMPARE, ring.bits, tuple(share.shape)))
        bit = eng.binary._borrow_tree(share, ring, item[3:])
        return eng.open_xor(bit)[0]

    b0, b1 = run_two(body, (word ^ mask,), (mask,))
    assert torch.equal(b0, b1)
    return b0


def test_every_pattern_of_eight_chunks() -> None:
    ring = Ring(32, 12)
    chunks = compare_chunks(ring.bits)
    index = torch.arange(3**chunks)
    patterns = torch.stack([(index // 3**j) % 3 for j in range(chunks)], -1)
    assert torch.equal(_secure_borrow(patterns, ring), _borrow(patterns))


@pytest.mark.parametrize("seed", [0, 1])
def test_sixteen_chunks_with_every_length_of_equal_top(seed: int) -> None:
    ring = Ring(64, 20)
    chunks = compare_chunks(ring.bits)
    gen = torch.Generator().manual_seed(seed)
    rows = 4000
    patterns = torch.randint(0, 3, (rows, chunks), generator=gen)
    # the top k chunks equal, for every k (all 16 equal: no borrow)
    top = torch.arange(rows) % (chunks + 1)
    patterns[torch.arange(chunks) >= chunks - top.unsqueeze(-1)] = EQUAL
    borrow = _borrow(patterns)
    assert 0 < int(borrow.sum()) < rows
    assert torch.equal(_secure_borrow(patterns, ring), borrow)


@pytest.mark.parametrize("bits", [32, 64])
def test_the_word_built_from_bytes_is_the_tree_word(bits: int) -> None:
    ring = Ring(bits, 0)
    chunks = compare_chunks(bits)
    gen = torch.Generator().manual_seed(bits)
    patterns = torch.randint(0, 3, (5000, chunks), generator=gen)
    patterns[0], patterns[1] = GREATER, EQUAL
    g = (patterns == GREATER).to(torch.int16)
    e = (patterns == EQUAL).to(torch.int16)
    assert torch.equal(tree_word(g, e, ring.dtype), _words(patterns, ring))


@pytest.mark.parametrize("bits", [32, 64])
def test_chunk_values_are_the_low_bits_four_at_a_time(bits: int) -> None:
    ring = Ring(bits, 0)
    gen = torch.Generator().manual_seed(bits)
    c = ring.random((3000,), gen)
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    c[:4] = torch.tensor([low, high, 0, -1], dtype=ring.dtype)
    unsigned = [int(v) % (1 << (bits - 1)) for v in c.tolist()]
    expected = [
        [(v >> (CHUNK_BITS * j)) & ((1 << CHUNK_BITS) - 1) for j in range(compare_chunks(bits))]
        for v in unsigned
    ]
    assert chunk_values(c, bits).tolist() == expected
