"""The parties' seeded streams: AES-256 in counter mode under a key per (seed, phase, run)."""

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed.prg import Prg

SEED = bytes(range(32))


def test_a_stream_is_fixed_by_its_seed_and_labels_and_differs_for_any_other() -> None:
    first = Prg.derived(SEED, 4, 7).ring((1000,), torch.int64)
    assert torch.equal(first, Prg.derived(SEED, 4, 7).ring((1000,), torch.int64))
    others = [
        Prg.derived(SEED, 4, 8),
        Prg.derived(SEED, 7, 4),
        Prg.derived(bytes(32), 4, 7),
        Prg.fresh(),
    ]
    for other in others:
        assert not torch.equal(first, other.ring((1000,), torch.int64))


def test_draws_continue_the_stream_whatever_their_sizes() -> None:
    whole = Prg.derived(SEED, 1).bytes(4096)
    prg = Prg.derived(SEED, 1)
    parts = [prg.bytes(n) for n in (1, 15, 16, 17, 1000, 3047)]
    assert torch.equal(torch.cat(parts), whole)


def test_ring_elements_and_bits_are_uniform() -> None:
    prg = Prg.derived(SEED, 2)
    words = prg.ring((4096,), torch.int64)
    assert words.dtype == torch.int64 and words.shape == (4096,)
    # each of the 64 bit positions is set in about half the words
    set_bits = torch.stack([(words >> b) & 1 for b in range(64)]).float().mean(1)
    assert ((set_bits - 0.5).abs() < 0.05).all()
    bits = prg.bits((20000,))
    assert set(bits.unique().tolist()) == {0, 1} and abs(bits.float().mean().item() - 0.5) < 0.02
    assert prg.ring((3, 5), torch.int32).shape == (3, 5)


def test_a_key_is_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        Prg(bytes(16))
