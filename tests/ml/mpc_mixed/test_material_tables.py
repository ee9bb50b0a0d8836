"""The dealer's comparison tables, formed arithmetically, and the ``equal`` tables the parties
derive from their shares of them, against their definition bit by bit."""

from __future__ import annotations

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed import comparison
from tessera_ml.algorithms.mpc_mixed.comparison import CHUNK_BITS, compare_chunks, table_words
from tessera_ml.algorithms.mpc_mixed.material_bits import _less_tables


def _by_definition(r_low: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Bit j * 2^CHUNK_BITS + v of the packed words is [chunk_j > v] or [chunk_j == v]."""
    chunks, size = compare_chunks(bits), 1 << CHUNK_BITS
    less = torch.zeros(*r_low.shape, chunks * size, dtype=torch.int64)
    equal = torch.zeros_like(less)
    for j in range(chunks):
        chunk = (r_low >> (j * CHUNK_BITS)) & (size - 1)
        for v in range(size):
            less[..., j * size + v] = (chunk > v).to(torch.int64)
            equal[..., j * size + v] = (chunk == v).to(torch.int64)
    return comparison.pack(less), comparison.pack(equal)


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
    want_less, _ = _by_definition(r_low, bits)
    assert less.shape == (*shape, table_words(bits)) and less.dtype == torch.int64
    assert torch.equal(less, want_less)


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("shape", [(1,), (7, 5), (3, 2, 4)])
def test_equal_tables_derived_from_xor_shares_of_less_match_their_definition(
    bits: int, shape: tuple[int, ...]
) -> None:
    r_low = _r_low(bits, shape)
    less = _less_tables(r_low, bits)
    gen = torch.Generator().manual_seed(bits + 1)
    less0 = torch.randint(-(2**63), 2**63 - 1, less.shape, dtype=torch.int64, generator=gen)
    less1 = less ^ less0
    equal = comparison.equal_tables(less0, True) ^ comparison.equal_tables(less1, False)
    _, want_equal = _by_definition(r_low, bits)
    assert torch.equal(equal, want_equal)
    # the ones for [chunk > -1] are added once, by the first party
    both_second = comparison.equal_tables(less0, False) ^ comparison.equal_tables(less1, False)
    assert not torch.equal(both_second, want_equal)
    # on a share of zeros the second party's derivation adds nothing and the first's only
    # those ones: bit 0 of each table
    table_starts = sum(1 << (i * (1 << CHUNK_BITS)) for i in range(64 >> CHUNK_BITS))
    zeros = torch.zeros_like(less0)
    assert torch.equal(comparison.equal_tables(zeros, False), zeros)
    assert torch.equal(comparison.equal_tables(zeros, True), zeros + table_starts)
