"""The secret-shared MLP (Linear -> BatchNorm -> ReLU per hidden layer, then Linear -> softmax)
and one training step of the method.

Weights are kept in the backward ring at p2. Each step: weights -> forward ring (shift right by
p2 - p1, reduce); forward in the forward ring, with batch normalisation in the second ring
between conversions; layer outputs -> second ring (extend, shift left) for the backward pass;
backward and the SGD update entirely in the second ring.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from tessera_ml.algorithms.mpc_mixed.binary import SharedBit
from tessera_ml.algorithms.mpc_mixed.functions import softmax, softmax_product
from tessera_ml.algorithms.mpc_mixed.layers import (
    NormCache,
    bias_trunc,
    linear_backward,
    linear_forward,
    norm_backward,
    norm_eval,
    norm_forward,
)
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.ring import Ring


def init_params(sizes: list[int], batch_norm: bool, seed: int) -> dict[str, torch.Tensor]:
    """The preset initial weights (float64), identical for the secure and plaintext runs."""
    gen = torch.Generator().manual_seed(seed)
    params: dict[str, torch.Tensor] = {}
    layers = len(sizes) - 1
    for i in range(layers):
        bound = 1.0 / sizes[i] ** 0.5
        w = (torch.rand(sizes[i], sizes[i + 1], generator=gen, dtype=torch.float64) * 2 - 1) * bound
        params[f"w{i}"] = w
        if i < layers - 1 and batch_norm:
            params[f"gamma{i}"] = torch.ones(sizes[i + 1], dtype=torch.float64)
            params[f"beta{i}"] = torch.zeros(sizes[i + 1], dtype=torch.float64)
            params[f"mean{i}"] = torch.zeros(sizes[i + 1], dtype=torch.float64)
            params[f"var{i}"] = torch.ones(sizes[i + 1], dtype=torch.float64)
        else:
            b = (torch.rand(sizes[i + 1], generator=gen, dtype=torch.float64) * 2 - 1) * bound
            params[f"b{i}"] = b
    return params


@dataclass
class SharedMlp:
    """This party's shares of every parameter, in the backward ring at p2."""

    layers: int
    batch_norm: bool
    params: dict[str, torch.Tensor] = field(default_factory=dict)

    @staticmethod
    def from_plain(
        eng: Engine, plain: dict[str, torch.Tensor], ring: Ring, batch_norm: bool, seed: int = 0
    ) -> SharedMlp:
        """Shares of the public initial parameters: v + s for party 0 and -s for party 1, with s
        uniform from ``seed`` (the same for both). The weights are public at this point; the mask
        makes party 0's share uniform, which the local shift-and-reduce to the forward ring needs
        for its rounding to be unbiased (with shares v and 0 it would round every weight up)."""
        layers = sum(1 for k in plain if k.startswith("w"))
        gen = torch.Generator().manual_seed(seed)
        shares: dict[str, torch.Tensor] = {}
        for k, v in plain.items():
            mask = ring.random(tuple(v.shape), gen)
            shares[k] = ring.encode(v) + mask if eng.index == 0 else -mask
        return SharedMlp(layers, batch_norm, shares)

    def has_norm(self, i: int) -> bool:
        return self.batch_norm and i < self.layers - 1


@dataclass
class _HiddenCache:
    relu: SharedBit
    norm: NormCache | None


def _input_product(
    eng: Engine, prec: Precision, h: torch.Tensor, w: torch.Tensor, keep: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """h @ w (2 p1 bits, forward ring) and, with ``keep``, h in the backward ring."""
    if keep:
        return prec.matmul_keeping_input(eng, h, w)
    return eng.arith.matmul(h, w, prec.forward), None


def hidden_forward(
    eng: Engine,
    prec: Precision,
    model: SharedMlp,
    i: int,
    h: torch.Tensor,
    fwd: dict[str, torch.Tensor],
    training: bool,
    keep: bool = False,
) -> tuple[torch.Tensor, SharedBit, NormCache | None, torch.Tensor | None]:
    """(output, relu bit, norm cache, the input in the backward ring if ``keep``)."""
    f = prec.forward
    p = model.params
    product, h_back = _input_product(eng, prec, h, fwd[f"w{i}"], keep)
    if not model.has_norm(i):
        z = bias_trunc(eng, product, fwd[f"b{i}"], f)
        out, bit = eng.binary.relu(z, f, prec.backward if training else None)
        return out, bit, None, h_back
    n = prec.norm
    z_norm = prec.product_to_norm(eng, product)
    cache = None
    if training:
        running = (p[f"mean{i}"], p[f"var{i}"])
        y, cache = norm_forward(
            eng, z_norm, p[f"gamma{i}"], p[f"beta{i}"], n, prec.bracket, running
        )
        assert cache.running is not None
        p[f"mean{i}"], p[f"var{i}"] = cache.running
    else:
        y = norm_eval(
            eng, z_norm, p[f"gamma{i}"], p[f"beta{i}"], p[f"mean{i}"], p[f"var{i}"], n, prec.bracket
        )
    y_fwd = prec.norm_to_forward(eng, y, 2 * n.frac)
    out, bit = eng.binary.relu(y_fwd, f, prec.backward if training else None)
    return out, bit, cache, h_back


def forward_weights(eng: Engine, prec: Precision, model: SharedMlp) -> dict[str, torch.Tensor]:
    """Weights and biases of the linear layers, shifted and reduced to the forward ring (local
    in ``mixed``: no round)."""
    names = [k for k in model.params if k.startswith(("w", "b")) and not k.startswith("beta")]
    converted = prec.weights_to_forward_many(eng, [model.params[k] for k in names])
    return dict(zip(names, converted, strict=True))


def forward(eng: Engine, prec: Precision, model: SharedMlp, x_fwd: torch.Tensor) -> torch.Tensor:
    """Evaluation forward pass: the softmax output in the forward ring."""
    fwd = forward_weights(eng, prec, model)
    h = x_fwd
    for i in range(model.layers - 1):
        h, _, _, _ = hidden_forward(eng, prec, model, i, h, fwd, training=False)
    last = model.layers - 1
    logits = linear_forward(eng, h, fwd[f"w{last}"], fwd[f"b{last}"], prec.forward)
    return softmax(eng, logits, prec.forward, prec.split)


def train_step(
    eng: Engine,
    prec: Precision,
    model: SharedMlp,
    x_fwd: torch.Tensor,
    x_back: torch.Tensor,
    y_back: torch.Tensor,
    lr: float,
) -> torch.Tensor:
    """One SGD step on a batch; returns the batch's softmax output (forward ring)."""
    f, b = prec.forward, prec.backward
    p = model.params
    last = model.layers - 1
    fwd = forward_weights(eng, prec, model)
    caches: list[_HiddenCache] = []
    # each hidden output reaches the backward ring in the round of the next layer's product
    inputs_back = [x_back]
    h = x_fwd
    for i in range(last):
        h, bit, norm, h_back = hidden_forward(eng, prec, model, i, h, fwd, True, keep=i > 0)
        caches.append(_HiddenCache(bit, norm))
        if h_back is not None:
            inputs_back.append(h_back)
    w, bias = (fwd[f"w{last}"], p[f"w{last}"]), (fwd[f"b{last}"], p[f"b{last}"])
    if last > 0:
        logits, h_back = prec.linear_keeping_input(eng, h, w, bias)
        inputs_back.append(h_back)
    else:
        logits = linear_forward(eng, h, w[0], bias[0], f)
    product = softmax_product(eng, logits, f, prec.split)
    probs, dz = prec.softmax_gradient(eng, product, y_back, lr / x_fwd.shape[0])
    grads: dict[str, torch.Tensor] = {}
    dw, db, dh = linear_backward(eng, inputs_back[last], p[f"w{last}"], dz, b, need_dx=last > 0)
    grads[f"w{last}"], grads[f"b{last}"] = dw, db
    for i in reversed(range(last)):
        cache = caches[i]
        assert dh is not None
        dy = eng.binary.mul_bit(dh, cache.relu)
        if cache.norm is not None:
            grads[f"gamma{i}"], grads[f"beta{i}"], dy = norm_backward(eng, dy, cache.norm, b)
        dw, db, dh = linear_backward(eng, inputs_back[i], p[f"w{i}"], dy, b, need_dx=i > 0)
        grads[f"w{i}"] = dw
        if not model.has_norm(i):
            grads[f"b{i}"] = db
    for name, g in grads.items():
        p[name] = p[name] - g
    return probs
