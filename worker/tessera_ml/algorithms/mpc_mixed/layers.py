"""Linear and batch-normalisation layers on shares: forward, backward and their caches.

All values carry the scale of their ring (``ring.frac`` fractional bits) unless noted; gradients
arrive already multiplied by the learning rate (it is folded into the output gradient), so the
SGD update is a local subtraction of shares.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tessera_ml.algorithms.mpc_mixed.functions import rsqrt
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.algorithms.mpc_mixed.ring import Ring, ring_sum


def linear_forward(
    eng: Engine, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, ring: Ring
) -> torch.Tensor:
    """x @ w + b, truncated back to the ring's scale."""
    return bias_trunc(eng, eng.arith.matmul(x, w, ring), b, ring)


def bias_trunc(
    eng: Engine, product: torch.Tensor, b: torch.Tensor | None, ring: Ring
) -> torch.Tensor:
    """product + b, with product at 2 * ring.frac bits, truncated back to the ring's scale."""
    if b is not None:
        product = product + (b << ring.frac)
    return eng.arith.trunc(product, ring.frac, ring)


def linear_backward(
    eng: Engine, x: torch.Tensor, w: torch.Tensor, dz: torch.Tensor, ring: Ring, need_dx: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(dW, db, dx) for z = x @ w + b: dz is opened once for both products, and both are
    truncated in one round."""
    db = ring_sum(dz, 0)
    if not need_dx:
        dw = eng.arith.matmul(x.t().contiguous(), dz, ring)
        return eng.arith.trunc(dw, ring.frac, ring), db, None
    dw, dx = eng.arith.matmul_pair(x.t().contiguous(), dz, w.t().contiguous(), ring)
    dw, dx = eng.arith.trunc_many([dw, dx], ring.frac, ring)
    return dw, db, dx


@dataclass
class NormCache:
    """Forward values the backward pass needs, with the step's batch-norm material: centred
    and scale were opened (masked) once in the forward pass and are reused in the backward."""

    centred: torch.Tensor
    inv_std: torch.Tensor
    scale: torch.Tensor
    open_centred: torch.Tensor
    open_scale: torch.Tensor
    material: list[torch.Tensor]
    running: tuple[torch.Tensor, torch.Tensor] | None = None


BN_EPS = 1e-3
BN_MOMENTUM = 0.1


def norm_forward(
    eng: Engine,
    z: torch.Tensor,
    gamma: torch.Tensor,
    beta: torch.Tensor,
    ring: Ring,
    bracket: Ring | None = None,
    running: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, NormCache]:
    """Batch statistics, then y = (z - mean) * gamma / sqrt(var + eps) + beta.

    Returns y at 2 * ring.frac fractional bits (the caller truncates once, to whatever scale the
    next layer wants) and what the backward pass needs. ``bracket``: see ``rsqrt``. With
    ``running`` (mean, var), the cache also holds them updated by ``BN_MOMENTUM``, truncated in
    the round of the scale's truncation.
    """
    batch = z.shape[0]
    f = ring.frac
    material = eng.provider.get(Request(Kind.NORM, ring.bits, tuple(z.shape)))
    a_c, a_s, _a_d, _a_k, a_cc, a_cs = material[:6]
    mean = eng.arith.mul_public(ring_sum(z, 0), 1.0 / batch, ring)
    centred = z - mean
    (e_c,) = eng.open(centred - a_c)
    sum_sq = ring_sum(eng.arith.product_of_masked(e_c, a_c, e_c, a_c, a_cc), 0)
    if batch & (batch - 1) == 0:  # dividing by B is part of the shift
        var = eng.arith.trunc(sum_sq, f + batch.bit_length() - 1, ring)
    else:
        var = eng.arith.mul_public(eng.arith.trunc(sum_sq, f, ring), 1.0 / batch, ring)
    inv_std = rsqrt(eng, eng.add_public(var, round(BN_EPS * ring.scale)), ring, bracket)
    raw = [eng.arith.mul(gamma, inv_std, ring)]
    if running is not None:
        factor = round(BN_MOMENTUM * ring.scale)
        raw += [(mean - running[0]) * factor, (var - running[1]) * factor]
    scale, *steps = eng.arith.trunc_many(raw, f, ring)
    (e_s,) = eng.open(scale - a_s)
    y = eng.arith.product_of_masked(e_c, a_c, e_s, a_s, a_cs) + (beta << f)
    cache = NormCache(centred, inv_std, scale, e_c, e_s, material)
    if running is not None:
        cache.running = (running[0] + steps[0], running[1] + steps[1])
    return y, cache


def norm_eval(
    eng: Engine,
    z: torch.Tensor,
    gamma: torch.Tensor,
    beta: torch.Tensor,
    mean: torch.Tensor,
    var: torch.Tensor,
    ring: Ring,
    bracket: Ring | None = None,
) -> torch.Tensor:
    """Normalisation with running statistics (evaluation); output at 2 * ring.frac."""
    inv_std = rsqrt(eng, eng.add_public(var, round(BN_EPS * ring.scale)), ring, bracket)
    scale = eng.arith.trunc(eng.arith.mul(gamma, inv_std, ring), ring.frac, ring)
    return eng.arith.mul(z - mean, scale, ring) + (beta << ring.frac)


def norm_backward(
    eng: Engine, dy: torch.Tensor, cache: NormCache, ring: Ring
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dgamma, dbeta, dz) with x_hat = centred * inv_std, scale = gamma * inv_std:
    dgamma = sum(dy * x_hat), dbeta = sum(dy),
    dz = scale * dy - scale * dbeta / B - (scale * inv_std * dgamma / B) * centred."""
    batch = dy.shape[0]
    f = ring.frac
    per_row = round(ring.scale / batch)
    a_c, a_s, a_d, a_k = cache.material[:4]
    a_dc, a_ds, a_ck = cache.material[6:]
    e_c, e_s = cache.open_centred, cache.open_scale
    dbeta = ring_sum(dy, 0)
    # dy's opening, and the products that do not need it, in one round
    (s_r, v), (e_d,) = eng.arith.mul_many(
        [(cache.scale, cache.inv_std), (cache.scale, dbeta)], ring, also=(dy - a_d,)
    )
    t = ring_sum(eng.arith.product_of_masked(e_d, a_d, e_c, a_c, a_dc), 0)
    t, s_r, v = eng.arith.trunc_many([t, s_r, v], f, ring)
    dgamma = eng.arith.mul(t, cache.inv_std, ring)
    # the divisions by B ride on dgamma's truncation
    dgamma, s_r, v = eng.arith.trunc_many([dgamma, s_r * per_row, v * per_row], f, ring)
    k = eng.arith.trunc(eng.arith.mul(s_r, dgamma, ring), f, ring)
    (e_k,) = eng.open(k - a_k)
    both = eng.arith.product_of_masked(e_d, a_d, e_s, a_s, a_ds) - eng.arith.product_of_masked(
        e_c, a_c, e_k, a_k, a_ck
    )
    dz = eng.arith.trunc(both, f, ring) - v
    return dgamma, dbeta, dz


__all__ = [
    "NormCache",
    "Precision",
    "bias_trunc",
    "linear_backward",
    "linear_forward",
    "norm_backward",
    "norm_eval",
    "norm_forward",
]
