"""Which ring each part of training runs in, and the conversions between them.

``mixed`` (the method): forward in Z_2^32 at ``p1`` fractional bits, backward, weights and batch
normalisation in Z_2^64 at ``p2``. ``all64`` and ``all32`` run everything in one ring, so the
benchmark can show what the mix buys.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.ring import Ring

MODES = ("mixed", "all64", "all32")


@dataclass(frozen=True)
class Precision:
    mode: str
    forward: Ring
    backward: Ring

    @staticmethod
    def of(mode: str, p1: int, p2: int) -> Precision:
        if mode == "mixed":
            return Precision(mode, Ring(32, p1), Ring(64, p2))
        if mode == "all64":
            return Precision(mode, Ring(64, p2), Ring(64, p2))
        if mode == "all32":
            return Precision(mode, Ring(32, p1), Ring(32, p1))
        raise ValueError(f"unknown precision mode {mode!r} (modes: {', '.join(MODES)})")

    @property
    def norm(self) -> Ring:
        """Batch normalisation runs at the higher precision."""
        return self.backward

    @property
    def bracket(self) -> Ring | None:
        """Where batch norm's reciprocal square root compares: the first ring, if there is one."""
        return self.forward if self.split else None

    @property
    def split(self) -> bool:
        return self.forward != self.backward

    def weights_to_forward(self, eng: Engine, w: torch.Tensor) -> torch.Tensor:
        """Second ring at p2 -> first ring at p1: shift right by p2 - p1, then reduce."""
        if not self.split:
            return w
        return self._shift_reduce(eng, w, self.backward.frac - self.forward.frac)

    def product_to_norm(self, eng: Engine, z: torch.Tensor) -> torch.Tensor:
        """A product in the forward ring (2 p1 fractional bits) -> norm ring at p2. In
        ``mixed`` the truncation rides on the extension's opening (one round, not two)."""
        f = self.forward
        if not self.split:
            return eng.arith.trunc(z, f.frac, f)
        shift = 2 * f.frac - self.norm.frac
        if shift >= 0:
            return eng.convert.trunc_extend(z, shift)
        return eng.arith.shift_left(eng.convert.extend(z), -shift)

    def matmul_keeping_input(
        self, eng: Engine, x: torch.Tensor, w: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x @ w in the forward ring (2 p1 bits), and x in the backward ring for the backward
        pass: in ``mixed`` x's extension is opened in the product's round."""
        if not self.split:
            return eng.arith.matmul(x, w, self.forward), x
        product, extended = eng.convert.matmul_extend(x, w, self.forward)
        return product, eng.arith.shift_left(extended, self.backward.frac - self.forward.frac)

    def linear_keeping_input(
        self,
        eng: Engine,
        x: torch.Tensor,
        w: tuple[torch.Tensor, torch.Tensor],
        b: tuple[torch.Tensor, torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x @ w + b in the forward ring at p1, and x in the backward ring; ``w`` and ``b``
        are given as (forward ring, backward ring). In ``mixed`` the product of x with the
        Z_2^64 weights is exact (``wide_matmul``, which also extends x), so its truncation is
        a local shift-and-reduce: one round in all, not two."""
        f, back = self.forward, self.backward
        if not self.split:
            product = eng.arith.matmul(x, w[0], f)
            return eng.arith.trunc(product + (b[0] << f.frac), f.frac, f), x
        product, extended = eng.wide.wide_matmul(x, w[1])
        logits = self._shift_reduce(eng, product + (b[1] << f.frac), back.frac)
        return logits, eng.arith.shift_left(extended, back.frac - f.frac)

    def softmax_gradient(
        self, eng: Engine, product: torch.Tensor, y: torch.Tensor, scale: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """From the softmax's last product (``softmax_product``, 2 p1 bits): the output p in
        the forward ring at p1, and dz = (p - y) * scale in the backward ring at p2 (y there
        too). In ``mixed`` the product is already exact in Z_2^64, p is a local
        shift-and-reduce of it, and dz's truncation also removes its extra bits: one round."""
        f, b = self.forward, self.backward
        if not self.split:
            probs = eng.arith.trunc(product, f.frac, f)
            return probs, eng.arith.mul_public(probs - y, scale, b)
        frac = 2 * f.frac
        if frac < b.frac:
            product, frac = eng.arith.shift_left(product, b.frac - frac), b.frac
        probs = eng.convert.trunc_reduce(product, frac - f.frac)
        diff = product - eng.arith.shift_left(y, frac - b.frac)
        return probs, eng.arith.trunc(diff * round(scale * b.scale), frac, b)

    def weights_to_forward_many(self, eng: Engine, ws: list[torch.Tensor]) -> list[torch.Tensor]:
        """``weights_to_forward`` of several tensors (local, no round)."""
        return [self.weights_to_forward(eng, w) for w in ws]

    def norm_to_forward(self, eng: Engine, y: torch.Tensor, frac: int) -> torch.Tensor:
        """A value at ``frac`` fractional bits in the norm ring -> forward ring at p1."""
        shift = frac - self.forward.frac
        if self.split:
            return self._shift_reduce(eng, y, shift)
        return eng.arith.trunc(y, shift, self.norm)

    def _shift_reduce(self, eng: Engine, x: torch.Tensor, shift: int) -> torch.Tensor:
        """Second ring -> first ring with a right shift: local up to 32 bits (the wrap of the
        shares vanishes modulo 2^32), else a secure truncation first."""
        if shift <= 32:
            return eng.convert.trunc_reduce(x, shift)
        return eng.convert.trunc_reduce(eng.arith.trunc(x, shift - 32, self.backward), 32)
