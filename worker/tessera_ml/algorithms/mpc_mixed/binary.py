"""XOR-shared bits: the comparison [x >= 0], and products of such a bit with additive shares
(ReLU and its derivative).

The comparison opens c = x + r; msb(x) = msb(c) XOR msb(r) XOR [r_low > c_low], the borrow of
c - r on the low bits, which comes from the dealer's per-chunk tables of r and is combined over
the chunks two per round (``tree``) or a level of groups per round (``fan_in``, see
``comparison``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tessera_ml.algorithms.mpc_mixed import comparison
from tessera_ml.algorithms.mpc_mixed.comparison import (
    CHUNK_BITS,
    COMPARISONS,
    TREE_E_BIT,
    compare_chunks,
    tree_levels,
    tree_places,
)
from tessera_ml.algorithms.mpc_mixed.party import Party
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.algorithms.mpc_mixed.ring import Ring


@dataclass
class SharedBit:
    """A secret bit d = z XOR b: z was opened, b is the dealer's bit, shared in each use's ring
    together with a Beaver pair (a, a*b) for one multiplication x * d."""

    z: torch.Tensor
    uses: list[tuple[int, torch.Tensor, torch.Tensor, torch.Tensor]]
    next_use: int = 0

    def arithmetic(self, use: int, index: int) -> torch.Tensor:
        """Shares of d itself in the ring of ``use``: d = z + (1 - 2z) b, z added by party 0."""
        _bits, b, _a, _ab = self.uses[use]
        z = self.z.to(b.dtype)
        return (1 - 2 * z) * b + (z if index == 0 else 0)


class Binary:
    """This party's side of the comparison and of the products by a secret bit. ``comparison``
    is ``tree`` or ``fan_in``."""

    def __init__(self, party: Party, comparison: str = "tree") -> None:
        if comparison not in COMPARISONS:
            raise ValueError(f"comparison is one of {', '.join(COMPARISONS)}, not {comparison!r}")
        self.party = party
        self.comparison = comparison

    # --- comparison -----------------------------------------------------------------------

    def nonneg_bit(self, x: torch.Tensor, ring: Ring) -> torch.Tensor:
        """XOR shares (0/1 bytes) of [x >= 0], i.e. NOT msb(x): c = x + r is opened, and the
        borrow of c - r on the low bits comes from the dealer's per-chunk tables of r."""
        bits = ring.bits
        fan_in = self.comparison == "fan_in"
        req = Request(Kind.COMPARE, bits, tuple(x.shape), fan_in=fan_in)
        item = self.party.provider.get(req)
        r, r_msb, less, rest = item[0], item[1], item[2], item[3:]
        c = self.party.reveal(x + r)
        # per chunk, [r > c] and [r == c] are entries of the tables of r at c's chunk
        value = comparison.chunk_values(c, bits)
        g, e = comparison.lookup(less, value, self.party.index == 0)
        if fan_in:
            borrow = self._borrow_fan_in(g, e, bits, rest)
        else:
            borrow = self._borrow_tree(comparison.tree_word(g, e, ring.dtype), ring, rest)
        bit = r_msb ^ borrow
        if self.party.index == 0:
            bit = bit ^ ((c >> (bits - 1)) & 1).to(torch.uint8) ^ 1
        return bit

    def _borrow_tree(
        self, word: torch.Tensor, ring: Ring, gates: list[torch.Tensor]
    ) -> torch.Tensor:
        """The chunks' g (r larger so far) and e (equal so far) in one word (``tree_places``),
        combined two chunks per level by one AND gate: the left operand holds e_j at both of
        chunk j's places, the right one the word shifted by the chunks' distance, so the gate
        gives e_j AND g_(j-1) at g's place and e_j AND e_(j-1) at e's."""
        g_bits, e_bits = tree_places(ring.bits)
        levels = tree_levels(ring.bits)
        shift = CHUNK_BITS
        for level in range(levels):
            a, b, ab = gates[3 * level : 3 * level + 3]
            e = word & e_bits
            # the last level needs g alone
            left = e >> TREE_E_BIT if level == levels - 1 else e ^ (e >> TREE_E_BIT)
            d_left, d_right = self.party.open_xor(left ^ a, (word << shift) ^ b)
            word = (word & g_bits) ^ self._and_share(d_left, d_right, a, b, ab)
            shift *= 2
        return ((word >> (CHUNK_BITS * (compare_chunks(ring.bits) - 1))) & 1).to(torch.uint8)

    def _borrow_fan_in(
        self, g: torch.Tensor, e: torch.Tensor, bits: int, material: list[torch.Tensor]
    ) -> torch.Tensor:
        """The chunks' (g, e) (..., chunks), packed 64 elements to a word and combined a level
        per round."""
        shape, chunks = g.shape[:-1], g.shape[-1]
        g_words = comparison.pack(g.reshape(-1, chunks).t())
        e_words = comparison.pack(e.reshape(-1, chunks).t())
        first = self.party.index == 0
        for level, masks, products in zip(
            comparison.levels(bits), material[0::2], material[1::2], strict=True
        ):
            (opened,) = self.party.open_xor(comparison.factors(level, g_words, e_words) ^ masks)
            g_words, e_words = comparison.combine(level, opened, products, first)
        return comparison.unpack(g_words.view(-1), math.prod(shape)).view(shape)

    def _and_share(
        self,
        d_x: torch.Tensor,
        d_y: torch.Tensor,
        a: torch.Tensor,
        b: torch.Tensor,
        ab: torch.Tensor,
    ) -> torch.Tensor:
        z = ab ^ (d_x & b) ^ (d_y & a)
        return z ^ (d_x & d_y) if self.party.index == 0 else z

    # --- products by a secret bit ---------------------------------------------------------

    def share_bit(
        self, bit: torch.Tensor, uses: tuple[Ring, ...], first: torch.Tensor | None = None
    ) -> tuple[SharedBit, torch.Tensor | None]:
        """Open bit XOR b for the dealer's bit b so later products x * bit cost one masked
        opening each. With ``first``, also returns first * bit in the same round."""
        item = self.party.provider.get(
            Request(Kind.SELECT, 0, tuple(bit.shape), uses=tuple(u.bits for u in uses))
        )
        b_xor = item[0]
        parts = [
            (u.bits, item[1 + 3 * i], item[2 + 3 * i], item[3 + 3 * i]) for i, u in enumerate(uses)
        ]
        shared = SharedBit(torch.empty(0), parts)
        if first is None:
            (z,) = self.party.open_xor(bit ^ b_xor)
            shared.z = z
            return shared, None
        bits, _b, a, _ab = shared.uses[0]
        assert first.dtype == Ring(bits, 0).dtype
        z, e = self.party.open_mixed(bit ^ b_xor, first - a)
        shared.z = z
        return shared, self._bit_product(first, e, shared)

    def mul_bit(self, x: torch.Tensor, shared: SharedBit) -> torch.Tensor:
        """x * bit for the next unused ring slot of ``shared`` (one round)."""
        _bits, _b, a, _ab = shared.uses[shared.next_use]
        (e,) = self.party.open(x - a)
        return self._bit_product(x, e, shared)

    @staticmethod
    def _bit_product(x: torch.Tensor, e: torch.Tensor, shared: SharedBit) -> torch.Tensor:
        _bits, b, _a, ab = shared.uses[shared.next_use]
        shared.next_use += 1
        z = shared.z.to(x.dtype)
        x_times_b = e * b + ab
        return z * x + (1 - 2 * z) * x_times_b

    def relu(
        self, x: torch.Tensor, ring: Ring, backward: Ring | None = None
    ) -> tuple[torch.Tensor, SharedBit]:
        """max(x, 0) and its derivative bit, ready for one more product in ``backward``."""
        bit = self.nonneg_bit(x, ring)
        uses = (ring,) if backward is None else (ring, backward)
        shared, out = self.share_bit(bit, uses, first=x)
        assert out is not None
        return out, shared
