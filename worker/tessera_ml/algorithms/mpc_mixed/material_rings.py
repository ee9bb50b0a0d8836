"""Material for truncation, for extension from Z_2^32 to Z_2^64 and for the wide products
across the two rings: masks r whose top bit (and, for an extension, r as an integer) is shared
too."""

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
from tessera_ml.algorithms.mpc_mixed.ring import Ring


class Trunc(MaterialKind):
    """r, r >> shift (logical) and msb(r), all in the request's ring."""

    kind = Kind.TRUNC

    def layout(self, req: Request) -> list[Slot]:
        return [arithmetic(req.shape, req.bits)] * 3

    def free(self, req: Request) -> list[int]:
        return [0]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        ring = ring_of(req)
        r = masks.ring(ring, req.shape)
        return [r, ring.high_bits(r, req.shift), ring.msb(r)]


class Extend(MaterialKind):
    """r in Z_2^32; r as an unsigned integer shifted right by ``shift``, and msb(r), in
    Z_2^64."""

    kind = Kind.EXTEND

    def layout(self, req: Request) -> list[Slot]:
        return _extension_slots(req.shape)

    def free(self, req: Request) -> list[int]:
        return [0]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        r, unsigned, msb = _extension_mask(req.shape, masks)
        return [r, unsigned >> req.shift, msb]


class WideMul(MaterialKind):
    """The extension masks (r, R = r unsigned, m = msb(r)) of x and y stacked, then R_x R_y
    and (R_x m_y, R_y m_x); for a square, those of x alone, then R R and R m."""

    kind = Kind.WIDE_MUL

    def layout(self, req: Request) -> list[Slot]:
        s = req.shape
        if req.square:
            return [*_extension_slots(s), arithmetic(s, 64), arithmetic(s, 64)]
        return [*_extension_slots((2, *s)), arithmetic(s, 64), arithmetic((2, *s), 64)]

    def free(self, req: Request) -> list[int]:
        return [0]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        if req.square:
            r_x, big_x, m_x = _extension_mask(req.shape, masks)
            return [r_x, big_x, m_x, big_x * big_x, big_x * m_x]
        r, big, m = _extension_mask((2, *req.shape), masks)
        return [r, big, m, big[0] * big[1], big * m.flip(0)]


class WideMatmul(MaterialKind):
    """The extension mask of x (n, k), a mask b of w (k, j) in Z_2^64, R @ b, and
    m_ik b_kj modulo 2^32 (its term carries 2^32)."""

    kind = Kind.WIDE_MATMUL

    def layout(self, req: Request) -> list[Slot]:
        n, k, j = req.shape[0], req.shape[1], req.other[-1]
        return [
            *_extension_slots(req.shape),
            arithmetic(req.other, 64),
            arithmetic((n, j), 64),
            arithmetic((n, k, j), 32),
        ]

    def free(self, req: Request) -> list[int]:
        return [0, 3]

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        r, big, m = _extension_mask(req.shape, masks)
        b = masks.ring(Ring(64, 0), req.other)
        return [r, big, m, b, big @ b, (m.unsqueeze(-1) * b.unsqueeze(0)).to(torch.int32)]


def _extension_slots(shape: tuple[int, ...]) -> list[Slot]:
    """Layout of ``_extension_mask``: r in Z_2^32, r unsigned and msb(r) in Z_2^64."""
    return [arithmetic(shape, 32), arithmetic(shape, 64), arithmetic(shape, 64)]


def _extension_mask(
    shape: tuple[int, ...], masks: Masks
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r = masks.ring(Ring(32, 0), shape)
    unsigned = r.to(torch.int64) & 0xFFFFFFFF
    return r, unsigned, unsigned >> 31


RING_MATERIALS = (Trunc(), Extend(), WideMul(), WideMatmul())
