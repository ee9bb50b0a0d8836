"""The ring's arithmetic, truncation, extension and comparison protocols against plaintext, on
random inputs and edge cases, with wrapping shares (the layers' protocols:
``test_layer_protocols.py``)."""

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed.comparison import levels
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.ring import Ring

from .helpers import GEN, RINGS, gaussian, on_both


@pytest.mark.parametrize("ring", RINGS, ids=["r32", "r64"])
def test_add_and_public_operations_are_local_and_exact(ring: Ring) -> None:
    x, y = ring.encode(gaussian((5, 3), 4)), ring.encode(gaussian((5, 3), 4))

    def fn(eng: Engine, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return eng.add_public(a + b, 7) - 3 * b

    sent = on_both(fn, x, y, ring=ring)
    assert torch.equal(sent, x + y + 7 - 3 * y)


@pytest.mark.parametrize("ring", RINGS, ids=["r32", "r64"])
def test_beaver_products_match_plaintext(ring: Ring) -> None:
    a, b, m = gaussian((6, 4), 2), gaussian((6, 4), 2), gaussian((4, 5), 1)
    a[0, 0], b[0, 0] = -3.5, -2.0  # negative times negative
    x, y, w = ring.encode(a), ring.encode(b), ring.encode(m)

    def fn(eng: Engine, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        mul = eng.arith.trunc(eng.arith.mul(x, y, ring), ring.frac, ring)
        mat = eng.arith.trunc(eng.arith.matmul(x, w, ring), ring.frac, ring)
        sq = eng.arith.trunc(eng.arith.square(x, ring), ring.frac, ring)
        row = eng.arith.trunc(eng.arith.mul(x, y[0], ring), ring.frac, ring)
        return torch.cat([mul.flatten(), mat.flatten(), sq.flatten(), row.flatten()])

    out = ring.decode(on_both(fn, x, y, w, ring=ring))
    xa, ya, wa = ring.decode(x), ring.decode(y), ring.decode(w)
    expected = torch.cat(
        [(xa * ya).flatten(), (xa @ wa).flatten(), (xa * xa).flatten(), (xa * ya[0]).flatten()]
    )
    assert torch.allclose(out, expected, atol=8 * 2.0**-ring.frac)


@pytest.mark.parametrize("ring", RINGS, ids=["r32", "r64"])
def test_truncation_is_floor_division_plus_at_most_one_over_the_whole_valid_range(
    ring: Ring,
) -> None:
    bound = 2 ** (ring.bits - 2)
    edges = [-bound, -bound + 1, -(2**ring.frac) - 1, -1, 0, 1, bound - 2, bound - 1]
    rand = torch.randint(-bound, bound, (2000,), generator=GEN, dtype=torch.int64)
    x = torch.cat([torch.tensor(edges, dtype=torch.int64), rand]).to(ring.dtype)
    for shift in (1, ring.frac, ring.bits // 2 - 3):

        def fn(eng: Engine, v: torch.Tensor, s: int = shift) -> torch.Tensor:
            return eng.arith.trunc(v, s, ring)

        out = on_both(fn, x, ring=ring).to(torch.int64)
        exact = torch.div(x.to(torch.int64), 2**shift, rounding_mode="floor")
        assert ((out == exact) | (out == exact + 1)).all(), shift


def test_extension_from_32_to_64_bits_is_exact_over_the_valid_range() -> None:
    ring = Ring(32, 12)
    bound = 2**30
    edges = [-bound, -bound + 1, -1, 0, 1, bound - 1]
    rand = torch.randint(-bound, bound, (3000,), generator=GEN, dtype=torch.int64)
    x = torch.cat([torch.tensor(edges, dtype=torch.int64), rand]).to(torch.int32)

    def fn(eng: Engine, v: torch.Tensor) -> torch.Tensor:
        out = eng.convert.extend(v)
        assert out.dtype == torch.int64
        return out

    out = on_both(fn, x, ring=ring)
    assert torch.equal(out, x.to(torch.int64))


def test_reduction_from_64_to_32_bits_keeps_the_value_modulo_2_to_the_32() -> None:
    big = torch.tensor([2**40 + 5, -(2**40) - 7, 2**31 + 9, -3, 2**62], dtype=torch.int64)
    out = on_both(lambda eng, v: eng.convert.reduce(v), big, ring=Ring(64, 0))
    assert out.dtype == torch.int32
    assert torch.equal(out.to(torch.int64), ((big + 2**31) % 2**32) - 2**31)


def test_shift_left_then_truncation_moves_between_precisions() -> None:
    ring64 = Ring(64, 20)
    x32 = Ring(32, 12).encode(gaussian((50,), 30))

    def fn(eng: Engine, v: torch.Tensor) -> torch.Tensor:
        up = eng.arith.shift_left(eng.convert.extend(v), 8)
        return eng.convert.reduce(eng.arith.trunc(up, 8, ring64))

    back = on_both(fn, x32, ring=Ring(32, 12))
    assert (back.to(torch.int64) - x32.to(torch.int64)).abs().max() <= 1


@pytest.mark.parametrize("comparison", ["tree", "fan_in"])
@pytest.mark.parametrize("ring", RINGS, ids=["r32", "r64"])
def test_comparison_is_exact_on_the_whole_ring(ring: Ring, comparison: str) -> None:
    top = 2 ** (ring.bits - 1)
    edges = [-top, -top + 1, -2, -1, 0, 1, 2, top - 2, top - 1]
    rand = ring.random((3000,), GEN)
    x = torch.cat([torch.tensor(edges, dtype=torch.int64).to(ring.dtype), rand])

    def fn(eng: Engine, v: torch.Tensor) -> torch.Tensor:
        bit = eng.binary.nonneg_bit(v, ring)
        return eng.open_xor(bit)[0].to(ring.dtype)

    bits = on_both(fn, x, ring=ring, comparison=comparison)
    assert torch.equal(bits.bool(), x >= 0)


@pytest.mark.parametrize("shape", [(1,), (63,), (64,), (65,), (3, 50, 2)])
def test_fan_in_comparison_packs_any_shape(shape: tuple[int, ...]) -> None:
    ring = Ring(32, 12)
    x = ring.random(shape, GEN)

    def fn(eng: Engine, v: torch.Tensor) -> torch.Tensor:
        bit = eng.binary.nonneg_bit(v, ring)
        assert bit.shape == v.shape and bit.dtype == torch.uint8
        return eng.open_xor(bit)[0].to(ring.dtype)

    bits = on_both(fn, x, ring=ring, comparison="fan_in")
    assert torch.equal(bits.bool(), x >= 0)


@pytest.mark.parametrize("ring", RINGS, ids=["r32", "r64"])
def test_fan_in_comparison_takes_a_round_per_level(ring: Ring) -> None:
    def fn(eng: Engine, v: torch.Tensor) -> torch.Tensor:
        before = eng.peer.stats.rounds
        bit = eng.binary.nonneg_bit(v, ring)
        assert eng.peer.stats.rounds - before == 1 + len(levels(ring.bits))
        return eng.open_xor(bit)[0].to(ring.dtype)

    on_both(fn, ring.random((10,), GEN), ring=ring, comparison="fan_in")
    assert [len(levels(b)) for b in (32, 64)] == [1, 2]


def test_an_unknown_comparison_is_refused() -> None:
    with pytest.raises(ValueError, match="comparison is one of tree, fan_in"):
        Engine(0, None, None, "ripple")  # type: ignore[arg-type]


def test_relu_forward_in_32_bits_and_its_derivative_applied_in_64_bits() -> None:
    r32, r64 = Ring(32, 12), Ring(64, 20)
    a = gaussian((300,), 5)
    a[:3] = torch.tensor([0.0, -(2.0**-12), 2.0**-12])
    g = gaussian((300,), 1e-3)
    x, grad = r32.encode(a), r64.encode(g)

    def fn(eng: Engine, v: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
        out, bit = eng.binary.relu(v, r32, r64)
        dx = eng.binary.mul_bit(dy, bit)
        return torch.cat([eng.convert.extend(out), dx])

    out = on_both(fn, x, grad, ring=r32)
    xs = r32.decode(x)
    assert torch.equal(out[:300], x.to(torch.int64).clamp(min=0))
    assert torch.equal(out[300:], torch.where(xs >= 0, grad, torch.zeros_like(grad)))


@pytest.mark.parametrize("shift", [0, 1, 8, 28, 32])
def test_local_truncation_to_32_bits_is_exact_up_to_rounding_on_the_whole_ring(shift: int) -> None:
    top = 2**63
    edges = [-top, -top + 1, -(2**40) - 3, -(2**shift) - 1, -1, 0, 1, 2**shift, 2**40, top - 1]
    rand = Ring(64, 0).random((3000,), GEN)
    x = torch.cat([torch.tensor(edges, dtype=torch.int64), rand])

    out = on_both(lambda eng, v: eng.convert.trunc_reduce(v, shift), x, ring=Ring(64, 20))
    assert out.dtype == torch.int32
    exact = torch.div(x, 2**shift, rounding_mode="floor")
    # compared modulo 2^32: floor or floor + 1
    diff = (out.to(torch.int64) - exact) & 0xFFFFFFFF
    assert ((diff == 0) | (diff == 1)).all()


def test_local_truncation_rounds_stochastically_without_bias() -> None:
    """floor(x / 2^d) + 1 with probability (x mod 2^d) / 2^d, over fresh random shares."""
    shift, low = 8, 64
    x = torch.full((20000,), 5 * 2**shift + low, dtype=torch.int64)
    out = on_both(lambda eng, v: eng.convert.trunc_reduce(v, shift), x, ring=Ring(64, 20))
    ups = (out.to(torch.int64) - 5).double()
    assert set(ups.unique().tolist()) <= {0.0, 1.0}
    assert abs(ups.mean().item() - low / 2**shift) < 0.02


@pytest.mark.parametrize("p1", [12, 6], ids=["local", "interactive-first"])
def test_norm_output_to_the_forward_ring(p1: int) -> None:
    """y at 2 * p2 fractional bits in Z_2^64 -> Z_2^32 at p1: a right shift by 28 bits is local,
    by 34 bits a secure truncation by 2 comes first."""
    prec = Precision.of("mixed", p1, 20)
    a = gaussian((400,), 3)
    edge = 2.0 ** min(30 - p1 - 1, 21)  # Z_2^32 range at p1; truncation range in Z_2^64
    a[:4] = torch.tensor([0.0, -1e-6, edge, -edge])
    y = torch.round(a * 2.0**40).to(torch.int64)

    out = on_both(lambda eng, v: prec.norm_to_forward(eng, v, 40), y, ring=Ring(64, 20))
    assert out.dtype == torch.int32
    exact = torch.div(y, 2 ** (40 - p1), rounding_mode="floor")
    diff = out.to(torch.int64) - exact
    assert ((diff >= 0) & (diff <= 2)).all()


@pytest.mark.parametrize("ring", RINGS, ids=["r32", "r64"])
def test_selection_of_public_values_by_secret_bits(ring: Ring) -> None:
    top = 2 ** (ring.bits - 1)
    edges = torch.tensor([-top, top - 1, -1, 0, 1], dtype=torch.int64).to(ring.dtype)
    values = torch.cat([edges, ring.random((495,), GEN)])
    bits = torch.randint(0, 2, (500,), generator=GEN, dtype=torch.uint8)
    bits[:5] = torch.tensor([1, 1, 1, 1, 0], dtype=torch.uint8)
    mask = torch.randint(0, 2, (500,), generator=GEN, dtype=torch.uint8)

    def fn(eng: Engine, _: torch.Tensor) -> torch.Tensor:
        xor_share = bits ^ mask if eng.index == 0 else mask
        shared, _ = eng.binary.share_bit(xor_share, (ring,))
        return shared.arithmetic(0, eng.index) * values

    out = on_both(fn, values, ring=ring)
    assert torch.equal(out, values * bits.to(ring.dtype))
