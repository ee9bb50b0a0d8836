"""Correlated randomness: what the dealer hands the two compute parties, item by item.

An item is described by a ``Request``; one ``MaterialKind`` per kind of item lists the tensors
each party receives (``layout``) and draws the dealer's values (``secrets``). A party's share of
an arithmetic tensor is additive in the ring; of a binary tensor (packed bits, or a 0/1 byte) it
is an XOR share.
"""

from __future__ import annotations

import torch

from tessera_ml.algorithms.mpc_mixed.material_beaver import BEAVER_MATERIALS
from tessera_ml.algorithms.mpc_mixed.material_bits import BIT_MATERIALS
from tessera_ml.algorithms.mpc_mixed.material_kind import MaterialKind, Slot
from tessera_ml.algorithms.mpc_mixed.material_rings import RING_MATERIALS
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.algorithms.mpc_mixed.ring import Ring

KINDS: dict[Kind, MaterialKind] = {
    m.kind: m for m in (*BEAVER_MATERIALS, *RING_MATERIALS, *BIT_MATERIALS)
}


def _kind(req: Request) -> MaterialKind:
    material = KINDS.get(req.kind)
    if material is None:
        raise ValueError(f"unknown material kind {req.kind}")
    return material


def layout(req: Request) -> list[Slot]:
    """The tensors of one item, as each party receives them."""
    return _kind(req).layout(req)


def secrets(req: Request, gen: torch.Generator) -> list[torch.Tensor]:
    """The dealer's values for one item, in ``layout`` order."""
    material = _kind(req)
    values = material.draw(req, gen)
    slots = material.layout(req)
    if len(values) != len(slots) or any(
        v.shape != slot.shape or v.dtype != slot.dtype
        for v, slot in zip(values, slots, strict=True)
    ):
        raise RuntimeError(f"the {req.kind.name} material drew values outside its layout")
    return values


def draw_share0(req: Request, prg: torch.Generator) -> list[torch.Tensor]:
    """Party 0's shares: pseudo-random from the seed it shares with the dealer."""
    out: list[torch.Tensor] = []
    for slot in layout(req):
        if slot.dtype == torch.uint8:
            out.append(torch.randint(0, 2, slot.shape, dtype=torch.uint8, generator=prg))
        else:
            out.append(Ring(32 if slot.dtype == torch.int32 else 64, 0).random(slot.shape, prg))
    return out


def split(
    req: Request, values: list[torch.Tensor], share0: list[torch.Tensor]
) -> list[torch.Tensor]:
    """Party 1's shares, given the secrets and party 0's shares."""
    return [
        v ^ s0 if slot.binary else v - s0
        for slot, v, s0 in zip(layout(req), values, share0, strict=True)
    ]
