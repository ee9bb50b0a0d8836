"""Two-party protocols on additive shares, one ``Engine`` per compute party.

A shared value x in ring R is held as x_0 + x_1 = x (mod 2^bits). Every online round opens masked
values only (x - a with a uniform dealer mask), so what a party receives is uniform. Truncation,
ring extension and comparison use dealer masks whose top bit is also shared: for a value x' in
[0, 2^(l-1)) masked as c = x' + r (mod 2^l), the wrap of the addition is msb(r) * (1 - msb(c)),
which is linear in the shares once c is public. Signed values are offset by 2^(l-2) to get there,
so these protocols need |x| < 2^(l-2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from tessera_ml.algorithms.mpc_mixed import comparison
from tessera_ml.algorithms.mpc_mixed.channel import Peer
from tessera_ml.algorithms.mpc_mixed.comparison import (
    CHUNK_BITS,
    COMPARISONS,
    FAN_IN_PARAM,
    TREE,
    compare_chunks,
    tree_levels,
)
from tessera_ml.algorithms.mpc_mixed.dealer import Provider
from tessera_ml.algorithms.mpc_mixed.material import Kind, Request, product_request
from tessera_ml.algorithms.mpc_mixed.ring import Ring, ring_sum

R32 = Ring(32, 0)
R64 = Ring(64, 0)


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


@dataclass(frozen=True)
class Factor:
    """A factor of ``Engine.products``: a ring share, or an XOR-shared 0/1 bit (uint8)."""

    value: torch.Tensor
    bit: bool = False


class Engine:
    """This party's side of every protocol. ``index`` is 0 or 1; ``comparison`` combines the
    chunks of a comparison two per round (``tree``) or a level of groups per round
    (``fan_in``, see ``comparison``)."""

    def __init__(
        self, index: int, peer: Peer, provider: Provider, comparison: str = "tree"
    ) -> None:
        if index not in (0, 1):
            raise ValueError("a compute party index is 0 or 1")
        if comparison not in COMPARISONS:
            raise ValueError(f"comparison is one of {', '.join(COMPARISONS)}, not {comparison!r}")
        self.index = index
        self.peer = peer
        self.provider = provider
        self.comparison = comparison

    # --- sharing and opening -------------------------------------------------------------

    def public(self, value: torch.Tensor) -> torch.Tensor:
        """Shares of a public ring tensor."""
        return value.clone() if self.index == 0 else torch.zeros_like(value)

    def add_public(self, x: torch.Tensor, value: torch.Tensor | int) -> torch.Tensor:
        return x + value if self.index == 0 else x.clone()

    def open(self, *xs: torch.Tensor) -> list[torch.Tensor]:
        """Reveal additive shares to both parties (one round)."""
        theirs = self.peer.exchange(*xs)
        return [x + y for x, y in zip(xs, theirs, strict=True)]

    def open_xor(self, *xs: torch.Tensor) -> list[torch.Tensor]:
        theirs = self.peer.exchange(*xs)
        return [x ^ y for x, y in zip(xs, theirs, strict=True)]

    def reveal(self, x: torch.Tensor) -> torch.Tensor:
        return self.open(x)[0]

    # --- multiplication -------------------------------------------------------------------

    def mul(self, x: torch.Tensor, y: torch.Tensor, ring: Ring) -> torch.Tensor:
        """Elementwise (broadcasting) product; fixed-point scales add up (no truncation)."""
        return self.mul_many([(x, y)], ring)[0][0]

    def matmul(self, x: torch.Tensor, y: torch.Tensor, ring: Ring) -> torch.Tensor:
        a, b, c = self.provider.get(Request(Kind.MATMUL, ring.bits, tuple(x.shape), tuple(y.shape)))
        e, f = self.open(x - a, y - b)
        return self._matmul_of_masked(e, a, f, b, c)

    def _matmul_of_masked(
        self, e: torch.Tensor, a: torch.Tensor, f: torch.Tensor, b: torch.Tensor, c: torch.Tensor
    ) -> torch.Tensor:
        """Share of x @ y from the opened e = x - a, f = y - b and the triple's c = a @ b:
        party 0 folds the public e @ f into e @ (b + f), two products for either party."""
        return c + e @ (b + f if self.index == 0 else b) + a @ f

    def matmul_extend(
        self, x: torch.Tensor, y: torch.Tensor, ring: Ring
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x @ y in Z_2^32 and x extended to Z_2^64, both openings in one round."""
        assert x.dtype == torch.int32
        a, b, c = self.provider.get(Request(Kind.MATMUL, ring.bits, tuple(x.shape), tuple(y.shape)))
        r32, r64, r_msb = self.provider.get(Request(Kind.EXTEND, 64, tuple(x.shape)))
        e, f, masked = self.open(x - a, y - b, self.add_public(x, 1 << 30) + r32)
        return self._matmul_of_masked(e, a, f, b, c), self._extended(masked, r64, r_msb, 0)

    def matmul_pair(
        self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, ring: Ring
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x @ y and y @ w in one round, y opened once for both (x: (n, m), y: (m, k),
        w: (k, n): the shapes of a linear layer's x^T, dz and W^T)."""
        req = Request(Kind.MATMUL_PAIR, ring.bits, tuple(x.shape), tuple(y.shape))
        a, b, ab, d, bd = self.provider.get(req)
        e, f, g = self.open(x - a, y - b, w - d)
        first = self.index == 0
        xy = ab + e @ (b + f if first else b) + a @ f
        yw = bd + f @ (d + g if first else d) + b @ g
        return xy, yw

    def mul_many(
        self,
        pairs: list[tuple[torch.Tensor, torch.Tensor | None]],
        ring: Ring,
        also: tuple[torch.Tensor, ...] = (),
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Beaver products x * y (x * x for y None) of several pairs in one round, which also
        opens the already masked tensors ``also``; returns (products, opened ``also``)."""
        items: list[list[torch.Tensor]] = []
        masked: list[torch.Tensor] = []
        for x, y in pairs:
            if y is None:
                items.append(self.provider.get(Request(Kind.SQUARE, ring.bits, tuple(x.shape))))
                masked.append(x - items[-1][0])
            else:
                req = Request(Kind.MUL, ring.bits, tuple(x.shape), tuple(y.shape))
                items.append(self.provider.get(req))
                masked += [x - items[-1][0], y - items[-1][1]]
        opened = self.open(*masked, *also)
        products, at = [], 0
        for item in items:
            if len(item) == 2:
                a, aa = item
                e = opened[at]
                z = aa + 2 * e * a
                products.append(z + e * e if self.index == 0 else z)
                at += 1
            else:
                a, b, c = item
                e, f = opened[at], opened[at + 1]
                z = c + e * b + a * f
                products.append(z + e * f if self.index == 0 else z)
                at += 2
        return products, opened[at:]

    def products(self, groups: list[list[Factor]], ring: Ring) -> list[torch.Tensor]:
        """The product of each group's factors (all of one shape), all groups in one round,
        exact (no truncation).

        A factor is an arithmetic share, or an XOR-shared 0/1 bit. Each is opened masked: x - a,
        or z = bit XOR b; then factor i is p_i + c_i m_i with p_i public (x - a, or z),
        c_i = 1 or 1 - 2 z, and m_i the dealer's mask (a, or b as a ring value), so the product
        is the sum over subsets S of the factors of
        prod_(i not in S) p_i * prod_(i in S) c_i * [prod_(i in S) m_i],
        the dealer sharing every subset's product of masks."""
        items = []
        masked: list[torch.Tensor] = []
        for group in groups:
            shape = tuple(group[0].value.shape)
            if any(tuple(f.value.shape) != shape for f in group):
                raise ValueError("the factors of a product must have one shape")
            item = self.provider.get(product_request(ring.bits, shape, [f.bit for f in group]))
            n_bits = sum(f.bit for f in group)
            bit_masks, subsets = iter(item[:n_bits]), item[n_bits:]
            for i, f in enumerate(group):
                masked.append(
                    f.value ^ next(bit_masks) if f.bit else f.value - subsets[(1 << i) - 1]
                )
            items.append((group, subsets))
        opened = iter(self._open_mixed(*masked))
        out = []
        for group, subsets in items:
            # coeff[S] = prod_(i in S) c_i * prod_(i not in S) p_i, S as a bitmask over factors
            coeff = torch.ones((1, *group[0].value.shape), dtype=ring.dtype)
            for f in group:
                o = next(opened)
                if f.bit:
                    z = o.to(ring.dtype)
                    coeff = torch.cat([coeff * z, coeff * (1 - 2 * z)])
                else:
                    coeff = torch.cat([coeff * o, coeff])
            total = ring_sum(coeff[1:] * torch.stack(subsets), 0)
            out.append(total + coeff[0] if self.index == 0 else total)
        return out

    def square(self, x: torch.Tensor, ring: Ring) -> torch.Tensor:
        return self.mul_many([(x, None)], ring)[0][0]

    def product_of_masked(
        self,
        e_x: torch.Tensor,
        a_x: torch.Tensor,
        e_y: torch.Tensor,
        a_y: torch.Tensor,
        a_xy: torch.Tensor,
    ) -> torch.Tensor:
        """x * y from x - a_x and y - a_y already opened (each value opened once, used in any
        number of products) and the dealer's shares of a_x * a_y."""
        z = a_xy + e_x * a_y + a_x * e_y
        return z + e_x * e_y if self.index == 0 else z

    def mul_public(self, x: torch.Tensor, value: float, ring: Ring) -> torch.Tensor:
        """x times a public real, truncated back to x's scale."""
        factor = round(value * ring.scale)
        return self.trunc(x * factor, ring.frac, ring)

    # --- shifts and ring conversions ------------------------------------------------------

    def trunc(self, x: torch.Tensor, shift: int, ring: Ring) -> torch.Tensor:
        """Secure right shift by ``shift`` bits: floor(x / 2^shift), plus one with probability
        (x mod 2^shift) / 2^shift (the masked low bits carry), i.e. stochastic rounding."""
        return self.trunc_each([x], [shift], ring)[0]

    def trunc_each(
        self, xs: list[torch.Tensor], shifts: list[int], ring: Ring
    ) -> list[torch.Tensor]:
        """``trunc`` of each tensor by its own shift, all in one round."""
        bits = ring.bits
        offset = 1 << (bits - 2)
        todo = [i for i, shift in enumerate(shifts) if shift]
        items = [
            self.provider.get(Request(Kind.TRUNC, bits, tuple(xs[i].shape), param=shifts[i]))
            for i in todo
        ]
        masked = [
            self.add_public(xs[i], ring.encode_int(offset)) + item[0]
            for i, item in zip(todo, items, strict=True)
        ]
        out = list(xs)
        if not todo:
            return out
        for i, item, c in zip(todo, items, self.open(*masked), strict=True):
            _r, r_high, r_msb = item
            shift = shifts[i]
            wrap = r_msb * (1 - ring.msb(c))
            low = (wrap << (bits - shift)) - r_high
            out[i] = self.add_public(low, ring.high_bits(c, shift) - (offset >> shift))
        return out

    def trunc_many(self, xs: list[torch.Tensor], shift: int, ring: Ring) -> list[torch.Tensor]:
        """``trunc`` of several tensors in one round."""
        flat = self.trunc(torch.cat([x.reshape(-1) for x in xs]), shift, ring)
        out, offset = [], 0
        for x in xs:
            out.append(flat[offset : offset + x.numel()].reshape(x.shape))
            offset += x.numel()
        return out

    @staticmethod
    def shift_left(x: torch.Tensor, shift: int) -> torch.Tensor:
        """x * 2^shift: local on each share."""
        return x << shift

    def extend(self, x: torch.Tensor) -> torch.Tensor:
        """Z_2^32 -> Z_2^64 at the same scale, with the wrap bit of the shares computed
        securely from the dealer's msb(r)."""
        return self.trunc_extend(x, 0)

    def trunc_extend(self, x: torch.Tensor, shift: int) -> torch.Tensor:
        """Z_2^32 -> Z_2^64 and a right shift by ``shift`` in the same opening: with
        x' = x + 2^30 = c - r + 2^32 w (c opened, w the wrap bit),
        (c >> d) - (r >> d) + 2^(32 - d) w is floor(x' / 2^d) plus one with probability
        (x' mod 2^d) / 2^d, the rounding of ``trunc``; the dealer supplies r >> d."""
        assert x.dtype == torch.int32 and 0 <= shift <= 30
        r32, r_high, r_msb = self.provider.get(
            Request(Kind.EXTEND, 64, tuple(x.shape), param=shift)
        )
        c = self.reveal(self.add_public(x, 1 << 30) + r32)
        return self._extended(c, r_high, r_msb, shift)

    def _extended(
        self, c: torch.Tensor, r_high: torch.Tensor, r_msb: torch.Tensor, shift: int
    ) -> torch.Tensor:
        """Shares of x >> shift in Z_2^64 from the opened c = x + 2^30 + r (mod 2^32)."""
        offset = 1 << 30
        c_unsigned = c.to(torch.int64) & 0xFFFFFFFF
        wrap = r_msb * (1 - ((c_unsigned >> 31) & 1))
        out = (wrap << (32 - shift)) - r_high
        return self.add_public(out, (c_unsigned >> shift) - (offset >> shift))

    def wide_mul(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        """x * y (or x * x) of Z_2^32 shares as Z_2^64 shares, exact (|x|, |y| < 2^30).

        Each factor is opened as for an extension, c = x + 2^30 + r, so x = P - R + 2^32 W m
        with P = c - 2^30 and W = 1 - msb(c) public, and R (r unsigned) and m = msb(r) the
        dealer's. Every term of the product is then a public coefficient times a dealer value
        or a product of dealer values, which the dealer shares in Z_2^64: one round, and a
        shift-and-reduce back to Z_2^32 truncates for free."""
        assert x.dtype == torch.int32 and (y is None or y.dtype == torch.int32)
        square = y is None
        req = Request(Kind.WIDE_MUL, 64, tuple(x.shape), param=1 if square else 0)
        item = self.provider.get(req)
        if y is None:
            r, big, m, big_big, big_m = item
            (c,) = self.open(self.add_public(x, 1 << 30) + r)
            p, w = _public_parts(c)
            z = big_big - 2 * p * big + ((w * (p * m - big_m)) << 33)
            return self.add_public(z, p * p)
        # x and y side by side: index 0 is x, 1 is y, and flip(0) pairs each with the other
        r, big, m, xy, cross = item
        (c,) = self.open(self.add_public(torch.stack([x, y]), 1 << 30) + r)
        p, w = _public_parts(c)
        other_p = p.flip(0)
        # P_x R_y + P_y R_x, and the terms carrying 2^32 (the one in m_x m_y carries 2^64)
        terms = ((other_p * w * m - w.flip(0) * cross) << 32) - other_p * big
        return self.add_public(xy + ring_sum(terms, 0), p.prod(0))

    def wide_matmul(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x @ w for x in Z_2^32 (|x| < 2^30) and w in Z_2^64, exact in Z_2^64, and x extended
        to Z_2^64: one round (x opened as for an extension, w as w - b).

        With x = P - R + 2^32 (D * m) (P, D public after the opening): P @ w is local,
        R @ w = R @ (w - b) + R @ b with the dealer's R @ b, and (D * m) @ w needs, besides
        (D * m) @ (w - b), the sums over i of D_ik m_ik b_kj, from the dealer's m_ik b_kj
        modulo 2^32 (the term carries 2^32). That term is therefore computed in Z_2^32, where
        torch's products are many times cheaper than in int64."""
        assert x.dtype == torch.int32 and w.dtype == torch.int64
        req = Request(Kind.WIDE_MATMUL, 64, tuple(x.shape), tuple(w.shape))
        r, big, m, b, big_b, m_b = self.provider.get(req)
        c, f = self.open(self.add_public(x, 1 << 30) + r, w - b)
        p, d = _public_parts(c)
        d32 = d.to(torch.int32)
        wrap = (d32 * m.to(torch.int32)) @ f.to(torch.int32)
        wrap += ring_sum(d32.unsqueeze(-1) * m_b, 1)
        z = p @ w - big @ f - big_b + (wrap.to(torch.int64) << 32)
        return z, self._extended(c, big, m, 0)

    def trunc_reduce(self, x: torch.Tensor, shift: int) -> torch.Tensor:
        """Z_2^64 -> Z_2^32 with a right shift by ``shift`` <= 32, locally (no round).

        Each party shifts its own share. The sum of the shifted shares misses the wrap of the
        share addition, 2^(64 - shift), a multiple of 2^32, so modulo 2^32 the only error is
        the carry out of the low bits: party 0 first adds 2^shift - 1, and the result is
        floor(x / 2^shift) plus one with probability (x mod 2^shift) / 2^shift, the same
        rounding as ``trunc``, for every x in the ring."""
        assert x.dtype == torch.int64
        if not 0 <= shift <= 32:
            raise ValueError("a local truncation to Z_2^32 shifts by at most 32 bits")
        if shift and self.index == 0:
            x = x + ((1 << shift) - 1)
        return (x >> shift).to(torch.int32)

    @staticmethod
    def reduce(x: torch.Tensor) -> torch.Tensor:
        """Z_2^64 -> Z_2^32: each share keeps its low 32 bits (exact modulo 2^32)."""
        assert x.dtype == torch.int64
        return x.to(torch.int32)

    # --- comparison -----------------------------------------------------------------------

    def nonneg_bit(self, x: torch.Tensor, ring: Ring) -> torch.Tensor:
        """XOR shares (0/1 bytes) of [x >= 0], i.e. NOT msb(x): c = x + r is opened, and the
        borrow of c - r on the low bits comes from the dealer's per-chunk tables of r,
        combined by the engine's ``comparison``."""
        bits = ring.bits
        fan_in = self.comparison == "fan_in"
        req = Request(Kind.COMPARE, bits, tuple(x.shape), param=FAN_IN_PARAM if fan_in else TREE)
        item = self.provider.get(req)
        r, r_msb, less, equal, rest = item[0], item[1], item[2], item[3], item[4:]
        c = self.reveal(x + r)
        # per chunk, [r > c] and [r == c] are entries of the dealer's tables at c's chunk
        chunks = compare_chunks(bits)
        at = torch.arange(chunks, dtype=torch.int64) * CHUNK_BITS
        c_low = c.to(torch.int64) & ((1 << (bits - 1)) - 1)
        value = (c_low.unsqueeze(-1) >> at) & ((1 << CHUNK_BITS) - 1)
        index = (torch.arange(chunks, dtype=torch.int64) << CHUNK_BITS) + value
        g, e = self._pick(less, index), self._pick(equal, index)
        if fan_in:
            borrow = self._borrow_fan_in(g, e, bits, rest)
        else:
            borrow = self._borrow_tree((g << at).sum(-1), (e << at).sum(-1), ring, rest)
        bit = r_msb ^ borrow
        if self.index == 0:
            bit = bit ^ ((c >> (bits - 1)) & 1).to(torch.uint8) ^ 1
        return bit

    def _borrow_tree(
        self, g: torch.Tensor, e: torch.Tensor, ring: Ring, tree: list[torch.Tensor]
    ) -> torch.Tensor:
        """The chunks' (g, e), chunk j at bit CHUNK_BITS * j of a word, combined two per
        level: g (r larger so far), e (equal so far)."""
        g, e = g.to(ring.dtype), e.to(ring.dtype)
        levels = tree_levels(ring.bits)
        shift = CHUNK_BITS
        for level in range(levels):
            if level == levels - 1:
                a, b1, ab1 = tree[5 * level : 5 * level + 3]
                d_e, d_1 = self.open_xor(e ^ a, (g << shift) ^ b1)
                g = g ^ self._and_share(d_e, d_1, a, b1, ab1)
            else:
                a, b1, b2, ab1, ab2 = tree[5 * level : 5 * level + 5]
                d_e, d_1, d_2 = self.open_xor(e ^ a, (g << shift) ^ b1, (e << shift) ^ b2)
                g = g ^ self._and_share(d_e, d_1, a, b1, ab1)
                e = self._and_share(d_e, d_2, a, b2, ab2)
            shift *= 2
        return ((g >> (CHUNK_BITS * (compare_chunks(ring.bits) - 1))) & 1).to(torch.uint8)

    def _borrow_fan_in(
        self, g: torch.Tensor, e: torch.Tensor, bits: int, material: list[torch.Tensor]
    ) -> torch.Tensor:
        """The chunks' (g, e) (..., chunks), packed 64 elements to a word and combined a level
        per round."""
        shape, chunks = g.shape[:-1], g.shape[-1]
        g_words = comparison.pack(g.reshape(-1, chunks).t())
        e_words = comparison.pack(e.reshape(-1, chunks).t())
        for level, masks, products in zip(
            comparison.levels(bits), material[0::2], material[1::2], strict=True
        ):
            (opened,) = self.open_xor(comparison.factors(level, g_words, e_words) ^ masks)
            g_words, e_words = comparison.combine(level, opened, products, self.index == 0)
        return comparison.unpack(g_words.view(-1), math.prod(shape)).view(shape)

    @staticmethod
    def _pick(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """XOR shares of bit ``index`` of the packed tables, one per chunk."""
        word = torch.gather(table, -1, index >> 6)
        return (word >> (index & 63)) & 1

    def _and_share(
        self,
        d_x: torch.Tensor,
        d_y: torch.Tensor,
        a: torch.Tensor,
        b: torch.Tensor,
        ab: torch.Tensor,
    ) -> torch.Tensor:
        z = ab ^ (d_x & b) ^ (d_y & a)
        return z ^ (d_x & d_y) if self.index == 0 else z

    # --- multiplication by a secret bit ---------------------------------------------------

    def share_bit(
        self, bit: torch.Tensor, uses: tuple[Ring, ...], first: torch.Tensor | None = None
    ) -> tuple[SharedBit, torch.Tensor | None]:
        """Open bit XOR b for the dealer's bit b so later products x * bit cost one masked
        opening each. With ``first``, also returns first * bit in the same round."""
        item = self.provider.get(
            Request(Kind.SELECT, 0, tuple(bit.shape), uses=tuple(u.bits for u in uses))
        )
        b_xor = item[0]
        parts = [
            (u.bits, item[1 + 3 * i], item[2 + 3 * i], item[3 + 3 * i]) for i, u in enumerate(uses)
        ]
        shared = SharedBit(torch.empty(0), parts)
        if first is None:
            (z,) = self.open_xor(bit ^ b_xor)
            shared.z = z
            return shared, None
        bits, _b, a, _ab = shared.uses[0]
        assert first.dtype == Ring(bits, 0).dtype
        z, e = self._open_mixed(bit ^ b_xor, first - a)
        shared.z = z
        return shared, self._bit_product(first, e, shared)

    def _open_mixed(self, *xs: torch.Tensor) -> list[torch.Tensor]:
        """Open shares of both kinds in one round: uint8 tensors are XOR shares, the rest
        additive."""
        theirs = self.peer.exchange(*xs)
        return [x ^ t if x.dtype == torch.uint8 else x + t for x, t in zip(xs, theirs, strict=True)]

    def mul_bit(self, x: torch.Tensor, shared: SharedBit) -> torch.Tensor:
        """x * bit for the next unused ring slot of ``shared`` (one round)."""
        _bits, _b, a, _ab = shared.uses[shared.next_use]
        (e,) = self.open(x - a)
        return self._bit_product(x, e, shared)

    def _bit_product(self, x: torch.Tensor, e: torch.Tensor, shared: SharedBit) -> torch.Tensor:
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


def _public_parts(c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """From an opened c = x + 2^30 + r (mod 2^32): c - 2^30 and 1 - msb(c), in Z_2^64."""
    unsigned = c.to(torch.int64) & 0xFFFFFFFF
    return unsigned - (1 << 30), 1 - (unsigned >> 31)
