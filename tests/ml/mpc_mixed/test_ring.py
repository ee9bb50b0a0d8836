import pytest
import torch

from tessera_ml.algorithms.mpc_mixed.ring import Ring, ring_sum

from .helpers import shared


@pytest.mark.parametrize(("bits", "frac"), [(32, 12), (64, 20)])
def test_encoding_round_trips_negative_and_fractional_values(bits: int, frac: int) -> None:
    ring = Ring(bits, frac)
    values = torch.tensor([-3.25, -1e-3, 0.0, 0.5, 1000.125], dtype=torch.float64)
    decoded = ring.decode(ring.encode(values))
    assert torch.allclose(decoded, values, atol=2.0**-frac)
    assert ring.encode(values).dtype == ring.dtype


def test_encoding_rejects_values_outside_the_ring() -> None:
    with pytest.raises(ValueError, match="out of range"):
        Ring(32, 12).encode(torch.tensor([2.0**20]))


def test_ring_rejects_unsupported_sizes() -> None:
    with pytest.raises(ValueError):
        Ring(16, 4)
    with pytest.raises(ValueError):
        Ring(32, 15)
    assert Ring(32, 14).frac == 14


@pytest.mark.parametrize("bits", [32, 64])
def test_shares_wrap_around_and_still_sum_to_the_value(bits: int) -> None:
    ring = Ring(bits, 0)
    top = 2 ** (bits - 1) - 1
    x = torch.tensor([-(2 ** (bits - 1)), -1, 0, 1, top], dtype=torch.int64).to(ring.dtype)
    (s0,), (s1,) = shared(x, ring=ring)
    assert torch.equal(s0 + s1, x)
    # uniform shares: the sum overflows the signed range for some elements
    wide = s0.to(torch.float64) + s1.to(torch.float64)
    assert ((wide >= 2 ** (bits - 1)) | (wide < -(2 ** (bits - 1)))).any()


def test_random_elements_cover_both_halves_and_all_bits() -> None:
    ring = Ring(64, 0)
    r = ring.random((4096,), torch.Generator().manual_seed(1))
    assert (r < 0).float().mean().item() == pytest.approx(0.5, abs=0.05)
    ones = torch.stack([(r >> k) & 1 for k in range(64)]).float().mean(1)
    assert ones.min().item() > 0.45 and ones.max().item() < 0.55


def test_ring_sum_stays_in_the_ring() -> None:
    x = torch.tensor([2**31 - 1, 1], dtype=torch.int32)
    out = ring_sum(x, 0)
    assert out.dtype == torch.int32 and out.item() == -(2**31)
