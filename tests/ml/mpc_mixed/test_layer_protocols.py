"""The protocols a layer's step is made of against plaintext: products with secret bits and
with extensions, the layers' forward and backward products, the softmax, wide products and
the weights' way to the forward ring."""

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed.arithmetic import Factor
from tessera_ml.algorithms.mpc_mixed.local import run_two
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.ring import Ring

from .helpers import GEN, RINGS, gaussian, on_both, shared


@pytest.mark.parametrize("ring", RINGS, ids=["r32", "r64"])
def test_products_of_shares_and_secret_bits_in_one_round_are_exact(ring: Ring) -> None:
    """Groups of up to six factors, some of them XOR-shared bits, at the ring's edges: the
    products wrap around exactly as in plaintext ring arithmetic."""
    top = 2 ** (ring.bits - 1)
    edges = torch.tensor([-top, top - 1, -1, 0, 1, 3], dtype=torch.int64).to(ring.dtype)
    values = [torch.cat([edges.roll(k), ring.random((194,), GEN)]) for k in range(3)]
    bits = torch.randint(0, 2, (4, 200), generator=GEN, dtype=torch.uint8)
    bits[:, :6] = 1
    mask = torch.randint(0, 2, (4, 200), generator=GEN, dtype=torch.uint8)
    kinds = [[False, True], [True, False, True, False], [False, True, False, True, True, False]]

    def fn(eng: Engine, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xor = bits ^ mask if eng.index == 0 else mask
        groups = []
        for kind in kinds:
            arithmetic, secret = iter((x, y, w)), iter(xor)
            groups.append(
                [Factor(next(secret), True) if b else Factor(next(arithmetic)) for b in kind]
            )
        before = eng.peer.stats.rounds
        out = torch.cat(eng.arith.products(groups, ring))
        assert eng.peer.stats.rounds == before + 1
        return out

    out = on_both(fn, *values, ring=ring)
    expected = []
    for kind in kinds:
        arithmetic, secret = iter(values), iter(bits)
        product = torch.ones(200, dtype=ring.dtype)
        for b in kind:
            product = product * (next(secret).to(ring.dtype) if b else next(arithmetic))
        expected.append(product)
    assert torch.equal(out, torch.cat(expected))


@pytest.mark.parametrize("ring", RINGS, ids=["r32", "r64"])
def test_linear_backward_products_with_the_gradient_opened_once(ring: Ring) -> None:
    """x^T @ dz and dz @ W^T from one round, then both truncated in one more."""
    xt, dz, wt = gaussian((5, 8), 2), gaussian((8, 3), 1), gaussian((3, 5), 1)
    xt[0, 0], dz[0, 0], wt[0, 0] = -4.0, -2.5, -1.0
    xe, de, we = ring.encode(xt), ring.encode(dz), ring.encode(wt)

    def fn(eng: Engine, x: torch.Tensor, d: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        before = eng.peer.stats.rounds
        xy, yw = eng.arith.matmul_pair(x, d, w, ring)
        xy, yw = eng.arith.trunc_many([xy, yw], ring.frac, ring)
        assert eng.peer.stats.rounds - before == 2
        assert xy.shape == (5, 3) and yw.shape == (8, 5)
        return torch.cat([xy.flatten(), yw.flatten()])

    out = ring.decode(on_both(fn, xe, de, we, ring=ring))
    xa, da, wa = ring.decode(xe), ring.decode(de), ring.decode(we)
    expected = torch.cat([(xa @ da).flatten(), (da @ wa).flatten()])
    assert torch.allclose(out, expected, atol=8 * 2.0**-ring.frac)


@pytest.mark.parametrize("shift", [0, 4, 12, 30])
def test_truncation_fused_with_extension_over_the_valid_range(shift: int) -> None:
    bound = 2**30
    edges = [-bound, -bound + 1, -(2**shift) - 1, -1, 0, 1, 2**shift, bound - 1]
    rand = torch.randint(-bound, bound, (3000,), generator=GEN, dtype=torch.int64)
    x = torch.cat([torch.tensor(edges, dtype=torch.int64), rand]).to(torch.int32)

    def fn(eng: Engine, v: torch.Tensor) -> torch.Tensor:
        before = eng.peer.stats.rounds
        out = eng.convert.trunc_extend(v, shift)
        assert out.dtype == torch.int64 and eng.peer.stats.rounds - before == 1
        return out

    out = on_both(fn, x, ring=Ring(32, 12))
    exact = torch.div(x.to(torch.int64), 2**shift, rounding_mode="floor")
    assert ((out == exact) | (out == exact + 1)).all()


def test_truncation_fused_with_extension_rounds_without_bias() -> None:
    x = torch.full((20000,), -7 * 16 + 12, dtype=torch.int32)
    out = on_both(lambda eng, v: eng.convert.trunc_extend(v, 4), x, ring=Ring(32, 12))
    ups = (out + 7).double()
    assert set(ups.unique().tolist()) <= {0.0, 1.0}
    assert abs(ups.mean().item() - 12 / 16) < 0.02


@pytest.mark.parametrize("p1", [12, 8], ids=["shift-right", "shift-left"])
def test_a_forward_product_to_the_norm_ring(p1: int) -> None:
    """2 p1 fractional bits in Z_2^32 -> p2 = 20 bits in Z_2^64, in one round."""
    prec = Precision.of("mixed", p1, 20)
    a = gaussian((300,), 8)
    a[:3] = torch.tensor([0.0, -(2.0**-20), 2.0 ** (30 - 2 * p1) - 1])
    z = torch.round(a * 2.0 ** (2 * p1)).to(torch.int32)
    out = on_both(lambda eng, v: prec.product_to_norm(eng, v), z, ring=Ring(32, p1))
    assert out.dtype == torch.int64
    expected = z.double() * 2.0 ** (20 - 2 * p1)
    assert ((out - expected).abs() <= 1).all(), (out - expected).abs().max()


def test_product_and_extension_of_its_left_operand_in_one_round() -> None:
    ring = Ring(32, 12)
    bound = 2**30
    h = torch.randint(-bound, bound, (40, 6), generator=GEN, dtype=torch.int64)
    h[0, :4] = torch.tensor([-bound, bound - 1, -1, 0])
    w = ring.encode(gaussian((6, 3), 1))

    def fn(eng: Engine, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        before = eng.peer.stats.rounds
        product, extended = eng.convert.matmul_extend(x, y, ring)
        assert eng.peer.stats.rounds - before == 1 and extended.dtype == torch.int64
        return torch.cat([product.to(torch.int64).flatten(), extended.flatten()])

    x = h.to(torch.int32)
    out = on_both(fn, x, w, ring=ring)
    assert torch.equal(out[:120].to(torch.int32), (x @ w).flatten())
    assert torch.equal(out[120:], h.flatten())


@pytest.mark.parametrize("mode", ["mixed", "all64", "all32"])
def test_keeping_a_layer_input_for_the_backward_pass(mode: str) -> None:
    prec = Precision.of(mode, 12, 20)
    f, b = prec.forward, prec.backward
    a = gaussian((30, 4), 3)
    a[0, :2] = torch.tensor([-(2.0**-12), 0.0])
    x, w = f.encode(a), f.encode(gaussian((4, 5), 1))

    def fn(eng: Engine, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xw, x_back = prec.matmul_keeping_input(eng, x, w)
        assert xw.dtype == f.dtype and x_back.dtype == b.dtype
        parts = [eng.reveal(t).to(torch.int64).flatten() for t in (xw, x_back)]
        return eng.public(torch.cat(parts))  # already revealed, per ring

    out = on_both(fn, x, w, ring=f).double()
    assert torch.equal(out[:150], (x @ w).double().flatten())
    assert torch.equal(out[150:] / 2.0**b.frac, f.decode(x).flatten())


@pytest.mark.parametrize("mode", ["mixed", "all64", "all32"])
def test_softmax_output_and_its_gradient_from_the_last_product(mode: str) -> None:
    """mixed: the product arrives exact in Z_2^64; the others: in the forward ring."""
    prec = Precision.of(mode, 12, 20)
    f, b = prec.forward, prec.backward
    probs = torch.rand(30, 5, generator=GEN, dtype=torch.float64)
    probs[0, :2] = torch.tensor([0.0, 1.0])
    y = torch.nn.functional.one_hot(torch.arange(30) % 5, 5).double()
    product = torch.round(probs * 2.0 ** (2 * f.frac)).to(torch.int64)
    product_ring = Ring(64, 0) if prec.split else f
    scale = 0.5 / 30

    def fn(eng: Engine, pr: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        p_fwd, dz = prec.softmax_gradient(eng, pr, yb, scale)
        assert p_fwd.dtype == f.dtype and dz.dtype == b.dtype
        parts = [eng.reveal(t).to(torch.int64).flatten() for t in (p_fwd, dz)]
        return eng.public(torch.cat(parts))

    pr0, pr1 = shared(product.to(product_ring.dtype), ring=product_ring)
    y0, y1 = shared(b.encode(y), ring=b)
    r0, r1 = run_two(fn, (pr0[0], y0[0]), (pr1[0], y1[0]))
    out = (r0 + r1).double()
    p_fwd, dz = out[:150] / 2.0**f.frac, out[150:] / 2.0**b.frac
    assert ((p_fwd - probs.flatten()).abs() <= 2.0 ** -(f.frac - 1)).all()
    expected = (probs - y).flatten() * scale
    assert ((dz - expected).abs() <= 2.0 ** -(f.frac - 1) * scale + 2.0 ** -(b.frac - 1)).all()


@pytest.mark.parametrize("square", [False, True], ids=["product", "square"])
def test_wide_product_of_32_bit_shares_is_exact_in_64_bits(square: bool) -> None:
    bound = 2**30
    edges = torch.tensor([-bound, -bound + 1, -1, 0, 1, bound - 1, bound - 1, -bound])
    x = torch.cat([edges, torch.randint(-bound, bound, (3000,), generator=GEN)])
    y = torch.cat([edges.flip(0), torch.randint(-bound, bound, (3000,), generator=GEN)])

    def fn(eng: Engine, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        before = eng.peer.stats.rounds
        out = eng.wide.wide_mul(a) if square else eng.wide.wide_mul(a, b)
        assert out.dtype == torch.int64 and eng.peer.stats.rounds - before == 1
        return eng.public(eng.reveal(out))  # revealed in Z_2^64

    out = on_both(fn, x.to(torch.int32), y.to(torch.int32), ring=Ring(32, 12))
    assert torch.equal(out, x * x if square else x * y)


def test_wide_product_then_local_truncation_matches_beaver_and_truncation() -> None:
    ring = Ring(32, 12)
    a, b = gaussian((500,), 3), gaussian((500,), 3)
    x, y = ring.encode(a), ring.encode(b)

    def fn(eng: Engine, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return eng.convert.trunc_reduce(eng.wide.wide_mul(u, v), ring.frac)

    out = on_both(fn, x, y, ring=ring).to(torch.int64)
    exact = torch.div(x.to(torch.int64) * y.to(torch.int64), 2**ring.frac, rounding_mode="floor")
    assert ((out == exact) | (out == exact + 1)).all()


@pytest.mark.parametrize("ring", RINGS, ids=["r32", "r64"])
def test_several_products_and_truncations_by_different_shifts_in_one_round_each(
    ring: Ring,
) -> None:
    a, b, m = gaussian((40,), 2), gaussian((40,), 2), gaussian((5, 40), 1)
    a[0], b[0] = -3.0, -1.5
    x, y, w = ring.encode(a), ring.encode(b), ring.encode(m)
    extra = ring.encode(gaussian((7,), 3))

    def fn(eng: Engine, u: torch.Tensor, v: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        before = eng.peer.stats.rounds
        (uv, uu, zu), (opened,) = eng.arith.mul_many(
            [(u, v), (u, None), (z, u)], ring, also=(extra,)
        )
        assert eng.peer.stats.rounds - before == 1
        uv, uu, zu = eng.arith.trunc_each([uv, uu, zu], [ring.frac, ring.frac + 1, 0], ring)
        assert eng.peer.stats.rounds - before == 2
        zu = eng.arith.trunc(zu, ring.frac, ring)
        parts = [uv, uu, zu.flatten(), eng.public(opened)]  # both sent extra: 2 * extra
        return torch.cat(parts)

    out = on_both(fn, x, y, w, ring=ring)
    xa, ya, wa = ring.decode(x), ring.decode(y), ring.decode(w)
    got = ring.decode(out[:-7])
    expected = torch.cat([xa * ya, xa * xa / 2, (wa * xa).flatten()])
    assert torch.allclose(got, expected, atol=4 * 2.0**-ring.frac)
    assert torch.equal(out[-7:], extra * 2)


def test_wide_matmul_of_a_32_bit_input_and_64_bit_weights_is_exact() -> None:
    bound = 2**30
    x = torch.randint(-bound, bound, (16, 8), generator=GEN, dtype=torch.int64)
    x[0, :4] = torch.tensor([-bound, bound - 1, -1, 0])
    w = torch.randint(-(2**30), 2**30, (8, 3), generator=GEN, dtype=torch.int64)
    w[0, 0] = -(2**30)
    x32 = x.to(torch.int32)
    w_mask = Ring(64, 0).random((8, 3), GEN)  # w's shares: w - mask and mask, both wrapping

    def fn(eng: Engine, a: torch.Tensor) -> torch.Tensor:
        before = eng.peer.stats.rounds
        product, extended = eng.wide.wide_matmul(a, w - w_mask if eng.index == 0 else w_mask)
        assert eng.peer.stats.rounds - before == 1
        opened = [eng.reveal(product).flatten(), eng.reveal(extended).flatten()]
        return eng.public(torch.cat(opened))

    out = on_both(fn, x32, ring=Ring(32, 12))
    assert torch.equal(out[:48], (x @ w).flatten())
    assert torch.equal(out[48:], x.flatten())


@pytest.mark.parametrize("mode", ["mixed", "all64", "all32"])
def test_output_layer_keeping_its_input(mode: str) -> None:
    """x @ w + b at p1 and x in the backward ring; mixed: one round, from the Z_2^64 weights."""
    prec = Precision.of(mode, 12, 20)
    f, b = prec.forward, prec.backward
    a = gaussian((30, 6), 2).clamp(min=0)
    a[0, :2] = torch.tensor([0.0, 2.0**-12])
    weights, bias = gaussian((6, 4), 1), gaussian((4,), 1)
    x = f.encode(a)

    def fn(eng: Engine, x: torch.Tensor) -> torch.Tensor:
        w_back, b_back = eng.public(b.encode(weights)), eng.public(b.encode(bias))
        w_pair = (prec.weights_to_forward(eng, w_back), w_back)
        b_pair = (prec.weights_to_forward(eng, b_back), b_back)
        before = eng.peer.stats.rounds
        logits, x_back = prec.linear_keeping_input(eng, x, w_pair, b_pair)
        assert eng.peer.stats.rounds - before == (1 if prec.split else 2)
        assert logits.dtype == f.dtype and x_back.dtype == b.dtype
        parts = [eng.reveal(t).to(torch.int64).flatten() for t in (logits, x_back)]
        return eng.public(torch.cat(parts))

    out = on_both(fn, x, ring=f).double()
    xa = f.decode(x)
    # the weights as encoded in the backward ring: what the protocol multiplies
    expected = xa @ b.decode(b.encode(weights)) + b.decode(b.encode(bias))
    assert ((out[:120] / f.scale - expected.flatten()).abs() <= 4 * 2.0**-f.frac).all()
    assert torch.equal(out[120:] / b.scale, xa.flatten())


def test_initial_weights_reach_the_forward_ring_without_rounding_bias() -> None:
    """Shares of the public initial weights are masked, so the local shift-and-reduce rounds
    them stochastically (shares w and 0 would round every weight up)."""
    prec = Precision.of("mixed", 12, 20)
    plain = {"w0": torch.rand(64, 64, generator=GEN, dtype=torch.float64) - 0.5}

    def fn(eng: Engine, _: torch.Tensor) -> torch.Tensor:
        model = SharedMlp.from_plain(eng, plain, prec.backward, False, seed=3)
        assert not torch.equal(model.params["w0"], prec.backward.encode(plain["w0"]))
        w32 = prec.weights_to_forward(eng, model.params["w0"])
        return eng.public(eng.reveal(w32).to(torch.int64))

    out = on_both(fn, torch.zeros(1, dtype=torch.int64), ring=Ring(64, 20))
    error = out * 2**8 - prec.backward.encode(plain["w0"])  # in units of 2^-20
    assert error.abs().max() < 2**8
    assert abs(error.double().mean().item()) < 16
