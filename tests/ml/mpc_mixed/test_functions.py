"""Non-linear functions and layers on shares against their plaintext definitions."""

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed import functions as F
from tessera_ml.algorithms.mpc_mixed.layers import (
    BN_EPS,
    norm_backward,
    norm_forward,
)
from tessera_ml.algorithms.mpc_mixed.local import engines
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.ring import Ring

from .helpers import on_both

R32, R64 = Ring(32, 12), Ring(64, 20)
GEN = torch.Generator().manual_seed(11)


@pytest.mark.parametrize("width", [2, 7, 10])
@pytest.mark.parametrize("ring", [R32, R64], ids=["r32", "r64"])
def test_row_max_with_ties_and_any_number_of_columns(ring: Ring, width: int) -> None:
    x = torch.randn(40, width, generator=GEN, dtype=torch.float64) * 6
    x[0] = -1.0  # all tied
    x[1, 0] = x[1, -1] = 50.0  # the maximum twice: exactly one of them may count
    x[2, -1] = -(2.0 ** (ring.bits - 3 - ring.frac))  # far below the rest
    enc = ring.encode(x)
    out = ring.decode(on_both(lambda e, v: F.row_max(e, v, ring), enc, ring=ring))
    assert torch.equal(out.flatten(), ring.decode(enc).max(1).values)


@pytest.mark.parametrize("upper", [2, 10, 100])
@pytest.mark.parametrize(
    ("ring", "wide"), [(R32, False), (R32, True), (R64, False)], ids=["r32", "r32-wide", "r64"]
)
def test_reciprocal_on_its_whole_domain(ring: Ring, wide: bool, upper: int) -> None:
    """Newton's steps are counted for the ring's precision: fewer in Z_2^32 at 12 bits."""
    s = torch.linspace(1.0, float(upper), 91, dtype=torch.float64).view(-1, 1)
    out = ring.decode(
        on_both(lambda e, v: F.reciprocal(e, v, ring, upper, wide), ring.encode(s), ring=ring)
    )
    assert torch.allclose(out, 1 / s, atol=6 * 2.0**-ring.frac)


def test_reciprocal_square_root_over_six_orders_of_magnitude() -> None:
    v = torch.logspace(-3, 3, 64, dtype=torch.float64)
    out = R64.decode(on_both(lambda e, x: F.rsqrt(e, x, R64), R64.encode(v), ring=R64))
    assert torch.allclose(out * v.sqrt(), torch.ones_like(v), atol=1.5e-3)


def test_reciprocal_square_root_bracketed_in_32_bits_starts_where_the_64_bit_one_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The comparisons in Z_2^32 at 14 bits choose the start as Z_2^64 does, from the bracket
    edges up to the probe's range limit 2^(31 - 14); then Newton's step reaches the same
    accuracy. The starts differ only by the stochastic rounding of b v (a unit); a neighbouring
    bracket's line would be off by about 1e-3 of y."""
    points = torch.tensor([2.0**j for j in range(-10, 12)], dtype=torch.float64)
    ulp = 2.0**-14
    v = torch.cat(
        [
            torch.logspace(-3, 3, 40, dtype=torch.float64),
            points,
            points + ulp,
            points - ulp,
            torch.tensor([2.0**16, 2.0**17 - ulp]),
        ]
    )
    enc = R64.encode(v)
    out = R64.decode(on_both(lambda e, x: F.rsqrt(e, x, R64, R32), enc, ring=R64))
    fits = v <= 1e3
    assert torch.allclose(out[fits] * v[fits].sqrt(), torch.ones_like(v[fits]), atol=1.5e-3)
    monkeypatch.setattr(F, "RSQRT_ITERATIONS", 0)
    start = on_both(lambda e, x: F.rsqrt(e, x, R64, R32), enc, ring=R64)
    start_wide = on_both(lambda e, x: F.rsqrt(e, x, R64), enc, ring=R64)
    assert (start - start_wide).abs().max() <= 1


def test_reciprocal_square_root_in_32_bits_where_it_fits() -> None:
    v = torch.logspace(-1, 2, 16, dtype=torch.float64)
    out = R32.decode(on_both(lambda e, x: F.rsqrt(e, x, R32), R32.encode(v), ring=R32))
    assert torch.allclose(out * v.sqrt(), torch.ones_like(v), atol=1e-2)


@pytest.mark.parametrize(
    ("ring", "wide", "truncation"),
    [(R32, False, "masked"), (R32, True, "masked"), (R32, True, "local"), (R64, False, "masked")],
    ids=["r32", "r32-wide", "r32-wide-lifted", "r64"],
)
def test_softmax_matches_its_plaintext_form(ring: Ring, wide: bool, truncation: str) -> None:
    logits = torch.randn(30, 10, generator=GEN, dtype=torch.float64) * 4
    logits[0] = 0.0
    logits[1, 3] = 40.0  # one dominant class: others clamp to zero
    enc = ring.encode(logits)
    out = ring.decode(
        on_both(lambda e, v: F.softmax(e, v, ring, wide), enc, ring=ring, truncation=truncation)
    )
    expected = F.softmax_plain(ring.decode(ring.encode(logits)))
    assert torch.allclose(out, expected, atol=0.01 if ring.bits == 32 else 1e-4)
    assert torch.allclose(out.sum(1), torch.ones(30, dtype=torch.float64), atol=0.02)


def test_batch_norm_forward_and_backward_match_the_formulas() -> None:
    ring = R64
    z = torch.randn(32, 6, generator=GEN, dtype=torch.float64) * 3 + 1
    gamma = torch.rand(6, generator=GEN, dtype=torch.float64) + 0.5
    beta = torch.randn(6, generator=GEN, dtype=torch.float64)
    dy = torch.randn(32, 6, generator=GEN, dtype=torch.float64) * 1e-2

    def fn(
        e: Engine, z: torch.Tensor, g: torch.Tensor, b: torch.Tensor, d: torch.Tensor
    ) -> torch.Tensor:
        y, cache = norm_forward(e, z, g, b, ring, running=(e.public(zeros), e.public(ones)))
        y = e.arith.trunc(y, ring.frac, ring)
        dgamma, dbeta, dz = norm_backward(e, d, cache, ring)
        assert cache.running is not None
        return torch.cat([y.flatten(), dgamma, dbeta, dz.flatten(), *cache.running])

    zeros, ones = ring.encode(torch.zeros(6)), ring.encode(torch.ones(6))
    out = ring.decode(on_both(fn, *(ring.encode(t) for t in (z, gamma, beta, dy)), ring=ring))
    running_mean, running_var = out[-12:-6], out[-6:]
    out = out[:-12]
    assert torch.allclose(running_mean, 0.1 * z.mean(0), atol=1e-4)
    assert torch.allclose(running_var, 0.9 + 0.1 * z.var(0, unbiased=False), atol=1e-3)
    zt = z.clone().requires_grad_(True)
    gt, bt = gamma.clone().requires_grad_(True), beta.clone().requires_grad_(True)
    mean, var = zt.mean(0), zt.var(0, unbiased=False)
    y = (zt - mean) / (var + BN_EPS).sqrt() * gt + bt
    y.backward(dy)
    assert zt.grad is not None and gt.grad is not None and bt.grad is not None
    n = 32 * 6
    assert torch.allclose(out[:n], y.detach().flatten(), atol=3e-3)
    assert torch.allclose(out[n : n + 6], gt.grad, atol=1e-4)
    assert torch.allclose(out[n + 6 : n + 12], bt.grad, atol=1e-5)
    assert torch.allclose(out[n + 12 :], zt.grad.flatten(), atol=1e-4)


def test_a_wide_product_and_truncation_take_one_round_instead_of_two() -> None:
    x, y = R32.encode(torch.tensor([0.5, -3.25, 7.0])), R32.encode(torch.tensor([2.0, 4.0, -0.5]))

    def rounds(wide: bool) -> torch.Tensor:
        def fn(eng: Engine, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            before = eng.peer.stats.rounds
            out = F.mul_trunc(eng, a, b, R32, wide)
            spent = eng.peer.stats.rounds - before
            return torch.cat([out, eng.public(torch.tensor([spent], dtype=torch.int32))])

        return on_both(fn, x, y, ring=R32)

    for wide, spent in ((True, 1), (False, 2)):
        out = rounds(wide)
        assert out[-1].item() == spent
        assert torch.allclose(R32.decode(out[:-1]), torch.tensor([1.0, -13.0, -3.5]).double())


@pytest.mark.parametrize(
    ("ring", "wide"), [(R32, False), (R32, True), (R64, False)], ids=["r32", "r32-wide", "r64"]
)
def test_exp_surrogate_over_its_domain_and_past_its_cut(ring: Ring, wide: bool) -> None:
    x = torch.cat([torch.linspace(-20.0, 0.0, 81, dtype=torch.float64), torch.tensor([-16.0])])
    enc = ring.encode(x)
    out = ring.decode(on_both(lambda e, v: F.exp_surrogate(e, v, ring, wide), enc, ring=ring))
    assert torch.allclose(out, F.exp_surrogate_plain(x), atol=8 * 2.0**-ring.frac)
    assert (out[x <= -16] == 0).all()


def test_with_local_truncation_the_wide_softmax_goes_on_in_z64_after_its_first_square() -> None:
    """``lifted``: the exponential's first square is the only wide product; the rest are Z_2^64
    products at the forward ring's fractional bits with local truncations, in as many rounds
    as the wide chain takes, and the product comes back exact in Z_2^64 as before."""
    logits = torch.randn(20, 10, generator=GEN, dtype=torch.float64) * 4
    logits[0] = 0.0
    enc = R32.encode(logits)
    high = Ring(64, R32.frac)

    def run(truncation: str) -> tuple[torch.Tensor, list[int], list[int]]:
        rounds, wides = [0, 0], [0, 0]  # per party: each party's thread writes its own

        def fn(eng: Engine, v: torch.Tensor) -> torch.Tensor:
            wide_mul = eng.wide.wide_mul

            def counted(*args: torch.Tensor) -> torch.Tensor:
                wides[eng.index] += 1
                return wide_mul(*args)

            eng.wide.wide_mul = counted  # type: ignore[method-assign]
            before = eng.peer.stats.rounds
            product = F.softmax_product(eng, v, R32, wide=True)
            rounds[eng.index] = eng.peer.stats.rounds - before
            assert product.dtype == torch.int64
            return product

        out = on_both(fn, enc, ring=R32, truncation=truncation)
        return out, rounds, wides

    lifted_out, lifted_rounds, lifted_wide = run("local")
    wide_out, wide_rounds, wide_wide = run("masked")
    expected = F.softmax_plain(R32.decode(enc))
    two_frac = Ring(64, 2 * R32.frac)
    for out in (lifted_out, wide_out):
        assert torch.allclose(two_frac.decode(out), expected, atol=0.01)
    assert lifted_rounds == wide_rounds and min(wide_rounds) > 0
    assert (lifted_wide, wide_wide) == ([1, 1], [13, 13])
    assert F.lifted(engines(truncation="local")[0], R32, True) == high
    assert F.lifted(engines(truncation="masked")[0], R32, True) is None
    assert F.lifted(engines(truncation="local")[0], R32, False) is None
