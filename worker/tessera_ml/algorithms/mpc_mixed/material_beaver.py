"""Material for products on additive shares: Beaver triples and their relatives, each mask
opened once and used in every product it takes part in."""

from __future__ import annotations

import torch

from tessera_ml.algorithms.mpc_mixed.material_kind import (
    Masks,
    MaterialKind,
    Slot,
    arithmetic,
    ring_of,
)
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request


class Mul(MaterialKind):
    """a, b and a * b (broadcasting)."""

    kind = Kind.MUL

    def layout(self, req: Request) -> list[Slot]:
        out = tuple(torch.broadcast_shapes(req.shape, req.other))
        return [arithmetic(s, req.bits) for s in (req.shape, req.other, out)]

    def free(self, req: Request) -> list[int]:
        return [0, 1]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        ring = ring_of(req)
        a, b = masks.ring(ring, req.shape), masks.ring(ring, req.other)
        return [a, b, a * b]


class Matmul(MaterialKind):
    """a, b and a @ b."""

    kind = Kind.MATMUL

    def layout(self, req: Request) -> list[Slot]:
        out = (*req.shape[:-1], req.other[-1])
        return [arithmetic(s, req.bits) for s in (req.shape, req.other, out)]

    def free(self, req: Request) -> list[int]:
        return [0, 1]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        ring = ring_of(req)
        a, b = masks.ring(ring, req.shape), masks.ring(ring, req.other)
        return [a, b, a @ b]


class Square(MaterialKind):
    """a and a * a."""

    kind = Kind.SQUARE

    def layout(self, req: Request) -> list[Slot]:
        return [arithmetic(req.shape, req.bits)] * 2

    def free(self, req: Request) -> list[int]:
        return [0]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        a = masks.ring(ring_of(req), req.shape)
        return [a, a * a]


class MatmulPair(MaterialKind):
    """a, b, a @ b, d and b @ d: x @ y and y @ w with y opened once (x: (n, m), y: (m, k),
    w: (k, n))."""

    kind = Kind.MATMUL_PAIR

    def layout(self, req: Request) -> list[Slot]:
        s, o = req.shape, req.other
        shapes = [s, o, (s[0], o[-1]), (o[-1], s[0]), (o[0], s[0])]
        return [arithmetic(shape, req.bits) for shape in shapes]

    def free(self, req: Request) -> list[int]:
        return [0, 1, 3]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        ring, s = ring_of(req), req.shape
        a, b = masks.ring(ring, s), masks.ring(ring, req.other)
        d = masks.ring(ring, (req.other[-1], s[0]))
        return [a, b, a @ b, d, b @ d]


class Norm(MaterialKind):
    """Batch normalisation's masks, of the centred input (B, F), the scale (F), the upstream
    gradient (B, F) and the backward coefficient (F), then the products of them it needs."""

    kind = Kind.NORM

    def layout(self, req: Request) -> list[Slot]:
        rows, column = arithmetic(req.shape, req.bits), arithmetic((req.shape[-1],), req.bits)
        return [rows, column, rows, column] + [rows] * 5

    def free(self, req: Request) -> list[int]:
        return [0, 1, 2, 3]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        ring, s = ring_of(req), req.shape
        a_c, a_s = masks.ring(ring, s), masks.ring(ring, (s[-1],))
        a_d, a_k = masks.ring(ring, s), masks.ring(ring, (s[-1],))
        return [a_c, a_s, a_d, a_k, a_c * a_c, a_c * a_s, a_d * a_c, a_d * a_s, a_c * a_k]


class Product(MaterialKind):
    """The masks of n factors (a random bit, XOR-shared, for each bit factor; its arithmetic
    copy counts as that factor's mask), then the product of the masks of every non-empty
    subset of the factors, subset S at index S - 1 as a bitmask."""

    kind = Kind.PRODUCT

    def layout(self, req: Request) -> list[Slot]:
        n, s = len(req.bit_factors), req.shape
        bit_masks = [Slot(s, torch.uint8, True)] * sum(req.bit_factors)
        return bit_masks + [arithmetic(s, req.bits)] * ((1 << n) - 1)

    def free(self, req: Request) -> list[int]:
        bits = sum(req.bit_factors)
        # the bit masks first, then each arithmetic factor's mask: subset {i} at bits + 2^i - 1
        arithmetic_masks = [bits + (1 << i) - 1 for i, b in enumerate(req.bit_factors) if not b]
        return [*range(bits), *arithmetic_masks]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        ring, s, bit_factors = ring_of(req), req.shape, req.bit_factors
        bit_masks = [masks.bits(s) for b in bit_factors if b]
        pending = iter(bit_masks)
        factor_masks = [
            next(pending).to(ring.dtype) if b else masks.ring(ring, s) for b in bit_factors
        ]
        subsets = [torch.empty(0)] * (1 << len(bit_factors))
        for subset in range(1, 1 << len(bit_factors)):
            low = (subset & -subset).bit_length() - 1
            rest = subset & (subset - 1)
            subsets[subset] = factor_masks[low] if rest == 0 else subsets[rest] * factor_masks[low]
        return [*bit_masks, *subsets[1:]]


BEAVER_MATERIALS = (Mul(), Matmul(), Square(), MatmulPair(), Norm(), Product())
