"""The plaintext reference: the same network, initialisation, batches, softmax form and update
rule in float64. The gap between its accuracy and the secure run's is the cost of the secure
arithmetic (fixed point, truncation error, approximated reciprocals)."""

from __future__ import annotations

import torch

from tessera_ml.algorithms.mpc_mixed.functions import softmax_plain
from tessera_ml.algorithms.mpc_mixed.layers import BN_EPS, BN_MOMENTUM


class PlainMlp:
    def __init__(self, params: dict[str, torch.Tensor], batch_norm: bool) -> None:
        self.p = {k: v.clone() for k, v in params.items()}
        self.layers = sum(1 for k in params if k.startswith("w"))
        self.batch_norm = batch_norm

    def _norm(self, i: int) -> bool:
        return self.batch_norm and i < self.layers - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p, h = self.p, x
        for i in range(self.layers - 1):
            z = h @ p[f"w{i}"]
            if self._norm(i):
                inv = (p[f"var{i}"] + BN_EPS).rsqrt()
                z = (z - p[f"mean{i}"]) * inv * p[f"gamma{i}"] + p[f"beta{i}"]
            else:
                z = z + p[f"b{i}"]
            h = z.clamp(min=0)
        last = self.layers - 1
        return softmax_plain(h @ p[f"w{last}"] + p[f"b{last}"])

    def train_step(self, x: torch.Tensor, y_onehot: torch.Tensor, lr: float) -> torch.Tensor:
        p, h = self.p, x
        batch = x.shape[0]
        saved: list[tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...] | None]] = []
        for i in range(self.layers - 1):
            z = h @ p[f"w{i}"]
            norm: tuple[torch.Tensor, ...] | None = None
            if self._norm(i):
                mean = z.mean(0)
                centred = z - mean
                var = (centred**2).mean(0)
                inv = (var + BN_EPS).rsqrt()
                scale = p[f"gamma{i}"] * inv
                z = centred * scale + p[f"beta{i}"]
                norm = (centred, inv, scale)
                p[f"mean{i}"] += BN_MOMENTUM * (mean - p[f"mean{i}"])
                p[f"var{i}"] += BN_MOMENTUM * (var - p[f"var{i}"])
            else:
                z = z + p[f"b{i}"]
            saved.append((h, z >= 0, norm))
            h = z.clamp(min=0)
        last = self.layers - 1
        probs = softmax_plain(h @ p[f"w{last}"] + p[f"b{last}"])
        dz = (probs - y_onehot) * (lr / batch)
        grads = {f"w{last}": h.t() @ dz, f"b{last}": dz.sum(0)}
        dh = dz @ p[f"w{last}"].t()
        for i in reversed(range(last)):
            x_in, positive, norm = saved[i]
            dy = dh * positive
            if norm is not None:
                centred, inv, scale = norm
                dgamma = (dy * centred).sum(0) * inv
                dbeta = dy.sum(0)
                grads[f"gamma{i}"], grads[f"beta{i}"] = dgamma, dbeta
                k = scale * inv * dgamma / batch
                dy = scale * dy - centred * k - scale * dbeta / batch
            else:
                grads[f"b{i}"] = dy.sum(0)
            grads[f"w{i}"] = x_in.t() @ dy
            dh = dy @ p[f"w{i}"].t()
        for name, g in grads.items():
            p[name] = p[name] - g
        return probs
