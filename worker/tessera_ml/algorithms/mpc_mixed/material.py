"""Correlated randomness: what the dealer hands the two compute parties, item by item.

An item is described by a ``Request``; one ``MaterialKind`` per kind of item lists the tensors
each party receives (``layout``) and draws the dealer's values (``secrets``). A party's share of
an arithmetic tensor is additive in the ring; of a binary tensor (packed bits, or a 0/1 byte) it
is an XOR share.

Party 0 draws all its shares from a seed it shares with the dealer. An item's masks (its
``free`` slots: a Beaver triple's a and b, a truncation's r, ...) are uniform, so party 1 draws
its shares of them from a seed of its own too, and the dealer forms each mask as the sum of the
two; only party 1's shares of what is computed from the masks (a @ b, r >> d, the comparison's
tables, ...) cross the network (``deal``, ``sent``).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch

from tessera_ml.algorithms.mpc_mixed.material_beaver import BEAVER_MATERIALS
from tessera_ml.algorithms.mpc_mixed.material_bits import BIT_MATERIALS
from tessera_ml.algorithms.mpc_mixed.material_kind import Masks, MaterialKind, Slot
from tessera_ml.algorithms.mpc_mixed.material_rings import RING_MATERIALS
from tessera_ml.algorithms.mpc_mixed.prg import ROOM, Prg
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request

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
    return list(_layout(_kind(req), req))


def free(req: Request) -> list[int]:
    """The item's masks: slots whose party-1 share party 1 draws itself (``deal``)."""
    return list(_free(_kind(req), req))


# a training step asks for the same items every step: their layouts are worked out once
@lru_cache(maxsize=4096)
def _layout(kind: MaterialKind, req: Request) -> tuple[Slot, ...]:
    return tuple(kind.layout(req))


@lru_cache(maxsize=4096)
def _free(kind: MaterialKind, req: Request) -> tuple[int, ...]:
    return tuple(kind.free(req))


def sent(req: Request) -> list[int]:
    """The slots whose party-1 share the dealer sends: all but the masks."""
    masks = set(free(req))
    return [i for i in range(len(layout(req))) if i not in masks]


def slot_bytes(slot: Slot) -> int:
    return math.prod(slot.shape) * slot.dtype.itemsize


def random_share(slot: Slot, prg: Prg) -> torch.Tensor:
    """A uniform share for ``slot``: a ring element, or a 0/1 byte."""
    return prg.bits(slot.shape) if slot.dtype == torch.uint8 else prg.ring(slot.shape, slot.dtype)


def random_shares(slots: list[Slot], prg: Prg) -> list[torch.Tensor]:
    """``random_share`` of each slot in turn, the same values, from one draw of the stream
    (a whole phase's slots: one call into the cipher instead of one per slot)."""
    return list(SlotBuffer(slots).draw(prg))


def grouped(tensors: list[torch.Tensor], sizes: list[int]) -> list[list[torch.Tensor]]:
    """``tensors`` cut, in order, into consecutive lists of ``sizes[i]`` tensors: a phase's
    slots, laid out end to end in one buffer, back into its items."""
    if sum(sizes) != len(tensors):
        raise ValueError(f"{len(tensors)} tensors do not make items of {sum(sizes)}")
    rest = iter(tensors)
    return [[next(rest) for _ in range(size)] for size in sizes]


class SlotBuffer:
    """``slots`` end to end over one byte buffer, as a stream or the dealer's bundle lays them
    out, and a tensor per slot that stays the same from run to run: a view of the buffer where
    the slot's offset suits its type, else a tensor of its own that ``refresh`` copies the
    slot's bytes into. A replayed phase asks for the same slots every run, so a run refills
    the buffer (``draw``, or a receive into ``raw``) and makes no tensor. The tensors hold one
    run's values: the next run overwrites them."""

    def __init__(self, slots: list[Slot]) -> None:
        sizes = [slot_bytes(slot) for slot in slots]
        self.size = sum(sizes)
        self._buffer = torch.empty(self.size + ROOM, dtype=torch.uint8)
        self.raw = self._buffer[: self.size]
        """The slots' bytes, end to end: where a receive of the bundle goes."""
        self.tensors: list[torch.Tensor] = []
        self._copies: list[tuple[torch.Tensor, torch.Tensor]] = []  # (bytes in raw, own bytes)
        self._bits: list[torch.Tensor] = []
        offset = 0
        for slot, size in zip(slots, sizes, strict=True):
            chunk = self.raw[offset : offset + size]
            offset += size
            if chunk.storage_offset() % slot.dtype.itemsize:
                own = torch.empty(size, dtype=torch.uint8)
                self._copies.append((chunk, own))
                chunk = own
            tensor = chunk.view(slot.dtype).reshape(slot.shape)
            self.tensors.append(tensor)
            if slot.dtype == torch.uint8:
                self._bits.append(tensor)

    def refresh(self) -> list[torch.Tensor]:
        """The slots' tensors, once ``raw`` holds new bytes."""
        for chunk, own in self._copies:
            own.copy_(chunk)
        return self.tensors

    def flush(self) -> torch.Tensor:
        """``raw``, once the slots' tensors hold new values: the bytes of a bundle to send."""
        for chunk, own in self._copies:
            chunk.copy_(own)
        return self.raw

    def draw(self, prg: Prg) -> list[torch.Tensor]:
        """``random_share`` of each slot in turn, the same values, from one draw of the stream
        into the same tensors."""
        prg.fill(self._buffer, self.size)
        for bits in self._bits:  # a 0/1 byte slot keeps each byte's low bit, as Prg.bits does
            bits.bitwise_and_(1)
        return self.refresh()


class _Fresh(Masks):
    """Masks drawn from one stream (the values alone, with no party's share in them)."""

    def __init__(self, prg: Prg) -> None:
        self._prg = prg

    def take(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return random_share(Slot(shape, dtype, False), self._prg)


class _Joint(Masks):
    """Masks made of party 0's and party 1's seeded shares of the item's ``free`` slots."""

    def __init__(
        self, req: Request, share0: list[torch.Tensor], masks1: list[torch.Tensor]
    ) -> None:
        self._slots, self._free, self._share0 = layout(req), free(req), share0
        self.share1 = masks1
        """Party 1's shares of the masks, in ``free`` order."""
        self.given: list[torch.Tensor] = []
        """The masks handed out, in order."""

    def take(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        if len(self.given) == len(self._free):
            raise RuntimeError("a material kind took more masks than its free slots")
        index = self._free[len(self.given)]
        slot = self._slots[index]
        if tuple(shape) != slot.shape or dtype != slot.dtype:
            raise RuntimeError(f"mask {len(self.given)} does not fit slot {index}: {slot}")
        s0, s1 = self._share0[index], self.share1[len(self.given)]
        self.given.append(s0 ^ s1 if slot.binary else s0 + s1)
        return self.given[-1]


def secrets(req: Request, source: Prg | Masks) -> list[torch.Tensor]:
    """The dealer's values for one item, in ``layout`` order, its masks from ``source``."""
    material = _kind(req)
    masks = _Fresh(source) if isinstance(source, Prg) else source
    values = material.draw(req, masks)
    slots = material.layout(req)
    if len(values) != len(slots) or any(
        v.shape != slot.shape or v.dtype != slot.dtype
        for v, slot in zip(values, slots, strict=True)
    ):
        raise RuntimeError(f"the {req.kind.name} material drew values outside its layout")
    return values


def draw_share0(req: Request, prg: Prg) -> list[torch.Tensor]:
    """Party 0's shares: pseudo-random from the seed it shares with the dealer."""
    return [random_share(slot, prg) for slot in layout(req)]


def deal(req: Request, prg0: Prg, prg1: Prg) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Both parties' shares of one item. Party 0's come from ``prg0``; of party 1's, those of the
    masks come from ``prg1`` (party 1 draws them itself, in ``free`` order) and the others are
    the values less party 0's shares (what the dealer sends, slots ``sent``). Each mask is
    uniform to either party, since the other's seed is unknown to it."""
    slots = layout(req)
    return deal_drawn(
        req, draw_share0(req, prg0), [random_share(slots[i], prg1) for i in free(req)]
    )


def deal_drawn(
    req: Request,
    share0: list[torch.Tensor],
    masks1: list[torch.Tensor],
    into: list[torch.Tensor] | None = None,
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """``deal`` with the seeded shares already drawn: ``share0`` party 0's of every slot, in
    ``layout`` order, and ``masks1`` party 1's of the masks, in ``free`` order. A phase's
    dealer draws them for all its items at once (``SlotBuffer``). With ``into`` (a tensor per
    slot of ``sent``, in order), party 1's shares of those slots are written there: where the
    dealer lays out its bundle."""
    masks = free(req)
    if len(share0) != len(layout(req)) or len(masks1) != len(masks):
        raise ValueError(f"the {req.kind.name} item got shares for other slots than its own")
    if into is not None and len(into) != len(layout(req)) - len(masks):
        raise ValueError(f"the {req.kind.name} item got places for other slots than it sends")
    targets = iter(into) if into is not None else None
    joint = _Joint(req, share0, masks1)
    values = secrets(req, joint)
    if len(joint.given) != len(masks):
        raise RuntimeError(f"the {req.kind.name} material left some of its masks untaken")
    taken = dict(zip(masks, zip(joint.given, joint.share1, strict=True), strict=True))
    share1: list[torch.Tensor] = []
    for index, (slot, value, s0) in enumerate(zip(layout(req), values, share0, strict=True)):
        if index not in taken:  # the value less party 0's share
            out = next(targets) if targets is not None else None
            if slot.binary:
                share1.append(torch.bitwise_xor(value, s0, out=out))
            else:
                share1.append(torch.sub(value, s0, out=out))
            continue
        mask, s1 = taken[index]
        if value is not mask:  # the kind must hold the very masks it took
            raise RuntimeError(f"the {req.kind.name} material changed its mask in slot {index}")
        share1.append(s1)
    return share0, share1
