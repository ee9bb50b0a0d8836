"""A small CNN on shares for 8x8 images: 3x3 convolution (1 -> C channels, padding 1) ->
BatchNorm over channels -> ReLU -> 2x2 sum pooling -> Linear -> softmax.

The convolution is a matmul on image patches (gathering patches is local on shares); pooling
and its backward are local sums and copies. Same rings and conversions as the MLP.
"""

from __future__ import annotations

import torch

from tessera_ml.algorithms.mpc_mixed.functions import softmax, softmax_plain, softmax_product
from tessera_ml.algorithms.mpc_mixed.layers import (
    BN_EPS,
    BN_MOMENTUM,
    linear_backward,
    linear_forward,
    norm_backward,
)
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp, forward_weights, hidden_forward
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine

SIDE = 8
KERNEL = 3


def patch_index(side: int = SIDE) -> torch.Tensor:
    """For each output position, the 9 positions of its 3x3 patch in the zero-padded image."""
    padded = side + 2
    rows = []
    for r in range(side):
        for c in range(side):
            rows.append([(r + i) * padded + (c + j) for i in range(KERNEL) for j in range(KERNEL)])
    return torch.tensor(rows, dtype=torch.int64)


def patches(x: torch.Tensor, side: int = SIDE) -> torch.Tensor:
    """(B, side*side) -> (B*side*side, 9) on shares or plaintext (zero padding is a share of 0)."""
    batch = x.shape[0]
    img = x.reshape(batch, side, side)
    padded = torch.nn.functional.pad(img, (1, 1, 1, 1)).reshape(batch, -1)
    return padded[:, patch_index(side)].reshape(batch * side * side, KERNEL * KERNEL)


def pool(z: torch.Tensor, batch: int, side: int = SIDE) -> torch.Tensor:
    """(B*side*side, C) -> (B, (side/2)^2 * C): sums of 2x2 blocks."""
    c = z.shape[1]
    half = side // 2
    blocks = z.reshape(batch, half, 2, half, 2, c)
    return blocks.sum((2, 4), dtype=z.dtype).reshape(batch, half * half * c)


def unpool(d: torch.Tensor, channels: int, side: int = SIDE) -> torch.Tensor:
    """Backward of ``pool``: each block's gradient to its four positions."""
    batch, half = d.shape[0], side // 2
    grid = d.reshape(batch, half, 1, half, 1, channels).expand(batch, half, 2, half, 2, channels)
    return grid.reshape(batch * side * side, channels)


def init_cnn(channels: int, classes: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    fan_in = KERNEL * KERNEL
    flat = (SIDE // 2) ** 2 * channels
    return {
        "w0": (torch.rand(fan_in, channels, generator=gen, dtype=torch.float64) * 2 - 1)
        / fan_in**0.5,
        "gamma0": torch.ones(channels, dtype=torch.float64),
        "beta0": torch.zeros(channels, dtype=torch.float64),
        "mean0": torch.zeros(channels, dtype=torch.float64),
        "var0": torch.ones(channels, dtype=torch.float64),
        "w1": (torch.rand(flat, classes, generator=gen, dtype=torch.float64) * 2 - 1) / flat**0.5,
        "b1": (torch.rand(classes, generator=gen, dtype=torch.float64) * 2 - 1) / flat**0.5,
    }


def cnn_forward(eng: Engine, prec: Precision, model: SharedMlp, x: torch.Tensor) -> torch.Tensor:
    f = prec.forward
    fwd = forward_weights(eng, prec, model)
    h, _, _, _ = hidden_forward(eng, prec, model, 0, patches(x), fwd, training=False)
    logits = linear_forward(eng, pool(h, x.shape[0]), fwd["w1"], fwd["b1"], f)
    return softmax(eng, logits, f, prec.split)


def cnn_train_step(
    eng: Engine,
    prec: Precision,
    model: SharedMlp,
    x_fwd: torch.Tensor,
    x_back: torch.Tensor,
    y_back: torch.Tensor,
    lr: float,
) -> torch.Tensor:
    f, b, p = prec.forward, prec.backward, model.params
    batch = x_fwd.shape[0]
    fwd = forward_weights(eng, prec, model)
    h, bit, cache, _ = hidden_forward(eng, prec, model, 0, patches(x_fwd), fwd, training=True)
    assert cache is not None
    weights, bias = (fwd["w1"], p["w1"]), (fwd["b1"], p["b1"])
    logits, pooled_back = prec.linear_keeping_input(eng, pool(h, batch), weights, bias)
    product = softmax_product(eng, logits, f, prec.split)
    probs, dz = prec.softmax_gradient(eng, product, y_back, lr / batch)
    dw1, db1, dpooled = linear_backward(eng, pooled_back, p["w1"], dz, b, need_dx=True)
    assert dpooled is not None
    dh = eng.binary.mul_bit(unpool(dpooled, p["gamma0"].shape[0]), bit)
    dgamma, dbeta, dconv = norm_backward(eng, dh, cache, b)
    dw0, _, _ = linear_backward(eng, patches(x_back), p["w0"], dconv, b, need_dx=False)
    grads = {"w0": dw0, "gamma0": dgamma, "beta0": dbeta, "w1": dw1, "b1": db1}
    for name, g in grads.items():
        p[name] = p[name] - g
    return probs


class PlainCnn:
    """The CNN in float64 with the same formulas (the plaintext reference)."""

    def __init__(self, params: dict[str, torch.Tensor]) -> None:
        self.p = {k: v.clone() for k, v in params.items()}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.p
        z = patches(x) @ p["w0"]
        z = (z - p["mean0"]) * (p["var0"] + BN_EPS).rsqrt() * p["gamma0"] + p["beta0"]
        return softmax_plain(pool(z.clamp(min=0), x.shape[0]) @ p["w1"] + p["b1"])

    def train_step(self, x: torch.Tensor, y_onehot: torch.Tensor, lr: float) -> torch.Tensor:
        p, batch = self.p, x.shape[0]
        cols = patches(x)
        z = cols @ p["w0"]
        mean = z.mean(0)
        centred = z - mean
        var = (centred**2).mean(0)
        inv = (var + BN_EPS).rsqrt()
        scale = p["gamma0"] * inv
        y = centred * scale + p["beta0"]
        p["mean0"] += BN_MOMENTUM * (mean - p["mean0"])
        p["var0"] += BN_MOMENTUM * (var - p["var0"])
        h = y.clamp(min=0)
        pooled = pool(h, batch)
        probs = softmax_plain(pooled @ p["w1"] + p["b1"])
        dz = (probs - y_onehot) * (lr / batch)
        dw1, db1 = pooled.t() @ dz, dz.sum(0)
        dh = unpool(dz @ p["w1"].t(), p["gamma0"].shape[0]) * (y >= 0)
        rows = dh.shape[0]
        dgamma = (dh * centred).sum(0) * inv
        dbeta = dh.sum(0)
        k = scale * inv * dgamma / rows
        dconv = scale * dh - centred * k - scale * dbeta / rows
        grads = {"w0": cols.t() @ dconv, "gamma0": dgamma, "beta0": dbeta, "w1": dw1, "b1": db1}
        for name, g in grads.items():
            p[name] = p[name] - g
        return probs
