"""Non-linear functions built from the protocols: max, reciprocal, reciprocal square root and
the MPC-friendly softmax.

Softmax form: p_i = f(z_i - max_j z_j) / sum_j f(z_j - max_j z_j) with f(x) = relu(1 + x/16)^16,
the limit approximation of exp made exact-zero below -16. The row maximum comes from all pairwise
secure comparisons at once, f from a ReLU and four squarings, and 1/sum (the sum lies in
[1, classes]) from Newton's iteration started at the minimax line. The cross-entropy gradient is
p - y. In ``mixed`` with local truncation the products after the exponential's first square run
in Z_2^64 at the forward ring's fractional bits (``lifted``).
"""

from __future__ import annotations

import itertools
import math

import torch

from tessera_ml.algorithms.mpc_mixed.arithmetic import Factor
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.ring import Ring, ring_sum

SOFTMAX_SQUARINGS = 4
PRODUCT_GROUP = 5
"""Factors per product in ``row_max``: the dealer shares 2^5 - 1 mask products for each."""
RSQRT_ITERATIONS = 1
RSQRT_TOP = 11
"""The highest bracket point is 2^11: the start holds for v < 2^12."""
RSQRT_LINE = (1.264010, -0.286350)
"""y0 = a + b m on [1, 2): the line that minimises the largest relative error of 1/sqrt(m)
after one Newton step (7.5e-4)."""
RSQRT_SLOPE_BITS = {64: 14, 32: 3}
"""Extra fractional bits of the slope b: b v must stay below 2^(l - 2) at 2 f + these bits."""


def row_max(eng: Engine, x: torch.Tensor, ring: Ring) -> torch.Tensor:
    """Maximum over the last dimension (kept, of size 1), in a number of rounds that hardly
    grows with the width: every pair (i < j) is compared in one batch, and

        max = sum_i x_i * prod_(j > i) [x_i >= x_j] * prod_(j < i) [x_i > x_j],

    where exactly one index passes, the first maximum. Each x_i times its n - 1 bits is a
    product of n factors, taken ``PRODUCT_GROUP`` at a time in one round
    (``Arithmetic.products``, the bits as XOR shares): two rounds for ten classes."""
    n = x.shape[-1]
    if n == 1:
        return x
    i, j = torch.triu_indices(n, n, 1)
    ge = eng.binary.nonneg_bit((x[..., i] - x[..., j]).contiguous(), ring)  # [x_i >= x_j]
    gt = ge ^ 1 if eng.index == 0 else ge  # [x_j > x_i]
    pair = torch.zeros(n, n, dtype=torch.long)
    pair[i, j] = torch.arange(len(i))
    pair[j, i] = torch.arange(len(i))
    others = ~torch.eye(n, dtype=torch.bool)
    index = pair[others].view(n, n - 1)  # row k: the pairs of k with every other column
    later = (torch.arange(n).view(-1, 1) < torch.arange(n).view(1, -1))[others].view(n, n - 1)
    bits = torch.where(later, ge[..., index], gt[..., index])  # (..., n, n - 1)
    factors = [Factor(x)] + [Factor(bits[..., m].contiguous(), bit=True) for m in range(n - 1)]
    while len(factors) > 1:
        groups = [factors[g : g + PRODUCT_GROUP] for g in range(0, len(factors), PRODUCT_GROUP)]
        products = eng.arith.products([g for g in groups if len(g) > 1], ring)
        factors = [Factor(v) for v in products] + [g[0] for g in groups if len(g) == 1]
    return ring_sum(factors[0].value, -1, keepdim=True)


def mul_trunc(
    eng: Engine,
    x: torch.Tensor,
    y: torch.Tensor | None,
    ring: Ring,
    wide: bool = False,
    extra: int = 0,
) -> torch.Tensor:
    """x * y (x * x when y is None) at the ring's scale, divided by 2^extra. With ``wide`` (a
    Z_2^32 ring in a mode that also has Z_2^64) the product is exact in Z_2^64 and comes back
    by a local shift-and-reduce: one round; otherwise a Beaver product and a truncation: two
    (the truncation takes a ``large`` value when extra > 0)."""
    if wide and ring.bits == 32:
        return eng.convert.trunc_reduce(eng.wide.wide_mul(x, y), ring.frac + extra)
    product = eng.arith.square(x, ring) if y is None else eng.arith.mul(x, y, ring)
    return eng.arith.trunc(product, ring.frac + extra, ring, large=extra > 0)


def lifted(eng: Engine, ring: Ring, wide: bool) -> Ring | None:
    """Where the softmax's products after its first run, if not in ``ring``: with ``wide``
    products of Z_2^32 shares and local truncation, in Z_2^64 at the same fractional bits.
    There a Beaver product and a local truncation take one round, as a wide product does, at
    about half its operations and dealer bytes. The first square lifts the exponential's input
    there, exactly (``Wide.wide_mul``); the largest value truncated locally is that square's,
    at most 2^(2 frac + 2k) (k = SOFTMAX_SQUARINGS): 2^32 at the default 12 bits, 2^36 at the
    most the spec allows, a wrong truncation below 2^-28 per element."""
    if wide and ring.bits == 32 and eng.arith.truncation == "local":
        return Ring(64, ring.frac)
    return None


def exp_surrogate(eng: Engine, x: torch.Tensor, ring: Ring, wide: bool = False) -> torch.Tensor:
    """relu(1 + x/2^k)^(2^k) for x <= 0; ``wide``: see ``mul_trunc``. The result is in
    ``lifted(eng, ring, wide)`` where that is a ring, else in ``ring``.

    Where the first square has room (Z_2^64, or wide products), relu(2^k + x) = 2^k relu(1 +
    x/2^k) is squared and the factor 2^(2k) leaves with that square's truncation; in Z_2^32
    alone x is truncated by k bits first (one round more)."""
    k = SOFTMAX_SQUARINGS
    high = lifted(eng, ring, wide)
    if wide or ring.bits == 64:
        y, _ = eng.binary.relu(eng.add_public(x, ring.scale << k), ring)
        if high is not None:
            y = eng.arith.trunc(eng.wide.wide_mul(y), ring.frac + 2 * k, high)
            ring, wide = high, False
        else:
            y = mul_trunc(eng, y, None, ring, wide, extra=2 * k)
    else:
        base = eng.add_public(eng.arith.trunc(x, k, ring), ring.scale)
        y, _ = eng.binary.relu(base, ring)
        y = mul_trunc(eng, y, None, ring)
    for _ in range(k - 1):
        y = mul_trunc(eng, y, None, ring, wide)
    return y


def reciprocal_line(classes: int, frac: int) -> tuple[float, float, int]:
    """Minimax line a - b*s for 1/s on [1, classes] with its coefficients rounded to ``frac``
    bits, and the Newton steps that bring the relative error 1 - s*y below 2^-(frac + 2), past
    the ring's resolution (the error squares at each step)."""
    c = float(classes)
    b = round(8.0 / ((c + 1.0) ** 2 + 4.0 * c) * 2**frac) / 2**frac
    a = round((c + 1.0) * 8.0 / ((c + 1.0) ** 2 + 4.0 * c) * 2**frac) / 2**frac
    # the largest |1 - s (a - b s)| on [1, c]: at the ends or where s (a - b s) peaks
    points = [1.0, c] + ([a / (2 * b)] if b > 0 and 1.0 < a / (2 * b) < c else [])
    err = min(max(abs(1.0 - s * (a - b * s)) for s in points), 1 - 1e-9)
    steps = max(1, math.ceil(math.log2((frac + 2) * math.log(2) / -math.log(max(err, 1e-9)))))
    return a, b, steps


def reciprocal(
    eng: Engine, s: torch.Tensor, ring: Ring, upper: int, wide: bool = False
) -> torch.Tensor:
    """1/s for s in [1, upper]: y <- y (2 - s y); ``wide``: see ``mul_trunc``."""
    a, b, steps = reciprocal_line(upper, ring.frac)
    if wide and ring.bits == 32:
        return _reciprocal_wide(eng, s, ring, a, b, steps)
    y = eng.add_public(-eng.arith.mul_public(s, b, ring), round(a * ring.scale))
    two = 2 * ring.scale
    for _ in range(steps):
        sy = mul_trunc(eng, s, y, ring)
        y = mul_trunc(eng, y, eng.add_public(-sy, two), ring)
    return y


def _reciprocal_wide(
    eng: Engine, s: torch.Tensor, ring: Ring, a: float, b: float, steps: int
) -> torch.Tensor:
    """``reciprocal`` with wide products. The start a - b s stays at 2 * frac bits: no
    truncation, so no round (it lies in (0, 2), inside the range 2^(30 - 2 frac) for
    frac <= 14); the first step's shift-and-reduce brings the products back to frac bits."""
    frac = ring.frac
    y = eng.add_public(-s * round(b * ring.scale), round(a * 2 ** (2 * frac)))
    y_frac = 2 * frac
    two = 2 * ring.scale
    for _ in range(steps):
        sy = eng.convert.trunc_reduce(eng.wide.wide_mul(s, y), y_frac)
        y = eng.convert.trunc_reduce(eng.wide.wide_mul(y, eng.add_public(-sy, two)), y_frac)
        y_frac = frac
    return y


def rsqrt_thresholds(ring: Ring) -> list[int]:
    """Exponents j of the bracket points 2^j used to start the reciprocal square root; the lower
    end keeps the start's products inside the ring's range."""
    lowest = -10 if ring.bits == 64 else -6
    return list(range(lowest, RSQRT_TOP + 1))


def rsqrt_line(j: int) -> tuple[float, float]:
    """(a, b) of the start y0 = a + b v for v in [2^j, 2^(j+1)): the line RSQRT_LINE fitted on
    [1, 2), scaled, since 1/sqrt(2^j m) = 2^(-j/2) / sqrt(m)."""
    alpha, beta = RSQRT_LINE
    return alpha * 2.0 ** (-j / 2), beta * 2.0 ** (-3 * j / 2)


def rsqrt(eng: Engine, v: torch.Tensor, ring: Ring, bracket: Ring | None = None) -> torch.Tensor:
    """1/sqrt(v) for v > 0 (a vector): bracket v between powers of two with one batch of
    comparisons, start on the bracket's line y0 = a + b v, then one Newton step
    y <- y (3 - v y^2) / 2.

    The round that opens the comparison bits also gives v * bit for each bracket point
    (``share_bit``), so a and b v are sums of public multiples; b carries ``RSQRT_SLOPE_BITS``
    more fractional bits than the ring, which the truncation of b v removes.
    With ``bracket`` (Z_2^32, when ``ring`` is Z_2^64), the comparisons run there on v shifted
    to 14 fractional bits (the most a Z_2^32 ring takes) and reduced, locally: exact for
    v < 2^17, beyond the start's range."""
    js = rsqrt_thresholds(ring)
    probe, at = v, ring
    if bracket is not None and bracket != ring:
        at = Ring(bracket.bits, min(ring.frac, bracket.bits // 2 - 2))
        probe = eng.convert.trunc_reduce(v, ring.frac - at.frac)
    points = torch.tensor([round(2.0**j * at.scale) for j in js], dtype=at.dtype)
    diffs = eng.add_public(probe.unsqueeze(0).expand(len(js), *v.shape), -points.view(-1, 1))
    bits = eng.binary.nonneg_bit(diffs.contiguous(), at)
    f, slope_bits = ring.frac, RSQRT_SLOPE_BITS[ring.bits]
    scales = (ring.scale, ring.scale * 2.0**slope_bits)
    lines = [rsqrt_line(j) for j in [js[0] - 1, *js]]
    increments = [
        torch.tensor(
            [round((now[i] - before[i]) * scales[i]) for before, now in itertools.pairwise(lines)],
            dtype=ring.dtype,
        ).view(-1, 1)
        for i in (0, 1)
    ]
    # one round opens the bits and gives v * bit for every bracket point
    shared, v_bits = eng.binary.share_bit(
        bits, (ring,), first=v.unsqueeze(0).expand_as(diffs).contiguous()
    )
    assert v_bits is not None
    a = eng.add_public(
        ring_sum(shared.arithmetic(0, eng.index) * increments[0], 0), round(lines[0][0] * scales[0])
    )
    bv = ring_sum(v_bits * increments[1], 0) + v * round(lines[0][1] * scales[1])
    y = a + eng.arith.trunc(bv, f + slope_bits, ring, large=True)
    for _ in range(RSQRT_ITERATIONS):
        # y (3 - v y^2) / 2 = (3 y - (v y) y^2) / 2: y^2 and v y in one round, then one product
        (y2, vy), _ = eng.arith.mul_many([(y, None), (v, y)], ring)
        y2, vy = eng.arith.trunc_many([y2, vy], f, ring)
        vy3 = eng.arith.mul(vy, y2, ring)
        y = eng.arith.trunc((3 * y << f) - vy3, f + 1, ring)
    return y


def softmax(eng: Engine, logits: torch.Tensor, ring: Ring, wide: bool = False) -> torch.Tensor:
    """The MPC-friendly softmax of the module docstring, row-wise; ``wide``: see
    ``mul_trunc``."""
    product = softmax_product(eng, logits, ring, wide)
    if wide and ring.bits == 32:
        return eng.convert.trunc_reduce(product, ring.frac)
    return eng.arith.trunc(product, ring.frac, ring)


def softmax_product(
    eng: Engine, logits: torch.Tensor, ring: Ring, wide: bool = False
) -> torch.Tensor:
    """``softmax`` before its last truncation (2 * ring.frac fractional bits): in ``ring``,
    or exact in Z_2^64 with ``wide`` (see ``mul_trunc``)."""
    shifted = logits - row_max(eng, logits, ring)
    e = exp_surrogate(eng, shifted, ring, wide)
    total = ring_sum(e, -1, keepdim=True)
    high = lifted(eng, ring, wide)
    if high is not None:
        return eng.arith.mul(e, reciprocal(eng, total, high, logits.shape[-1]), high)
    inv = reciprocal(eng, total, ring, logits.shape[-1], wide)
    if wide and ring.bits == 32:
        return eng.wide.wide_mul(e, inv.expand_as(e).contiguous())
    return eng.arith.mul(e, inv, ring)


def exp_surrogate_plain(x: torch.Tensor) -> torch.Tensor:
    n = 2**SOFTMAX_SQUARINGS
    return torch.clamp(1.0 + x / n, min=0.0) ** n


def softmax_plain(logits: torch.Tensor) -> torch.Tensor:
    """The same softmax form in floating point (the plaintext reference)."""
    e = exp_surrogate_plain(logits - logits.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)
