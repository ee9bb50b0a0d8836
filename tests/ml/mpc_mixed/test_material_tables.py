"""The dealer's comparison tables, formed arithmetically, and the bits the parties read off
their shares of them (``less`` and the derived ``equal``), against their definition bit by
bit."""

from __future__ import annotations

import math

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed import comparison
from tessera_ml.algorithms.mpc_mixed.comparison import CHUNK_BITS, compare_chunks, table_words
from tessera_ml.algorithms.mpc_mixed.material_bits import _less_tables


def _less_by_definition(r_low: torch.Tensor, bits: int) -> torch.Tensor:
    """Bit j * 2^CHUNK_BITS + v of the packed words is [chunk_j > v]."""
    chunks, size = compare_chunks(bits), 1 << CHUNK_BITS
    less = torch.zeros(*r_low.shape, chunks * size, dtype=torch.int64)
    for j in range(chunks):
        chunk = (r_low >> (j * CHUNK_BITS)) & (size - 1)
        for v in range(size):
            less[..., j * size + v] = (chunk > v).to(torch.int64)
    return comparison.pack(less)


def _r_low(bits: int, shape: tuple[int, ...]) -> torch.Tensor:
    gen = torch.Generator().manual_seed(bits)
    r = torch.randint(-(2**62), 2**62, shape, dtype=torch.int64, generator=gen) * 2
    r.view(-1)[0] = -1  # every chunk 15 where the bits reach: the top table bit is the sign bit
    if r.numel() > 1:
        r.view(-1)[1] = 0  # every chunk 0: the equal tables' bits that come from no less bit
    return r & ((1 << (bits - 1)) - 1)


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("shape", [(1,), (7, 5), (3, 2, 4)])
def test_less_tables_match_their_definition(bits: int, shape: tuple[int, ...]) -> None:
    r_low = _r_low(bits, shape)
    less = _less_tables(r_low, bits)
    assert less.shape == (*shape, table_words(bits)) and less.dtype == torch.int64
    assert torch.equal(less, _less_by_definition(r_low, bits))


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("shape", [(1,), (7, 5), (3, 2, 4)])
def test_lookup_on_xor_shares_of_less_gives_both_bits_of_every_chunk(
    bits: int, shape: tuple[int, ...]
) -> None:
    r_low = _r_low(bits, shape)
    less = _less_tables(r_low, bits)
    gen = torch.Generator().manual_seed(bits + 1)
    less0 = torch.randint(-(2**63), 2**63 - 1, less.shape, dtype=torch.int64, generator=gen)
    less1 = less ^ less0
    chunks, size = compare_chunks(bits), 1 << CHUNK_BITS
    dtype = torch.int32 if bits == 32 else torch.int64
    # every value of every chunk, element by element: value[..., j] = (element + 3 j) mod 16
    flat = torch.arange(math.prod(shape), dtype=dtype).view(shape)
    value = (flat.unsqueeze(-1) + 3 * torch.arange(chunks, dtype=dtype)) % size
    g0, e0 = comparison.lookup(less0, value, True)
    g1, e1 = comparison.lookup(less1, value, False)
    assert g0.dtype == e0.dtype == torch.int16 and g0.shape == (*shape, chunks)
    chunk = (r_low.unsqueeze(-1) >> (CHUNK_BITS * torch.arange(chunks))) & (size - 1)
    assert torch.equal(g0 ^ g1, (chunk > value).to(torch.int16))
    assert torch.equal(e0 ^ e1, (chunk == value).to(torch.int16))
    # the ones for [chunk > -1] are added once, by the first party
    _, e1_as_first = comparison.lookup(less1, value, True)
    assert not torch.equal(e0 ^ e1_as_first, (chunk == value).to(torch.int16))
    # on a share of zeros the second party's bits are all zero, the first's only [v == 0]
    zeros = torch.zeros_like(less0)
    assert not any(t.any() for t in comparison.lookup(zeros, value, False))
    g_first, e_first = comparison.lookup(zeros, value, True)
    assert not g_first.any() and torch.equal(e_first, (value == 0).to(torch.int16))
