"""Arithmetic on additive shares within one ring: Beaver products, products of several factors,
and truncation (the fixed-point rescaling after a product).

Every round opens masked values only (x - a with a uniform dealer mask). Truncation masks x with
an r whose top bit is also shared: for x' = x + 2^(l-2) in [0, 2^(l-1)) and c = x' + r
(mod 2^l), the wrap of the addition is msb(r) * (1 - msb(c)), linear in the shares once c is
public. So truncation needs |x| < 2^(l-2).

``local`` truncation (SecureML's, as two-party 64-bit systems use it) opens nothing: party 0
shifts its share, party 1 negates, shifts and negates back. With x_0 uniform, the shares' sum
wraps (as signed integers) with probability |x| / 2^l, and only then is the result off by
2^(l - d); otherwise it is the masked truncation's floor(x / 2^d) plus one with probability
(x mod 2^d) / 2^d. For x below 2^lx that is a probability below 2^(lx - l) per element: in
Z_2^64 at 20 fractional bits, below 2^-20 for a product of reals under 2^4. In Z_2^32 it would
be 2^-4, so Z_2^32 truncations always open their mask, and so do truncations whose caller
marks the value ``large`` (it may exceed 2^LOCAL_RANGE_BITS, e.g. a slope carrying extra
fractional bits).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tessera_ml.algorithms.mpc_mixed.party import Party
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.algorithms.mpc_mixed.ring import Ring, ring_sum


@dataclass(frozen=True)
class Factor:
    """A factor of ``Arithmetic.products``: a ring share, or an XOR-shared 0/1 bit (uint8)."""

    value: torch.Tensor
    bit: bool = False


TRUNCATIONS = ("masked", "local")
"""How Z_2^64 shares are truncated: a masked opening (one round), or each share on its own."""
LOCAL_RANGE_BITS = 48
"""Values truncated locally stay below 2^48 (callers mark larger ones ``large``; the benchmark's
``wraps`` tool measures them): wrong by 2^(64 - d) with probability below 2^-16 per element."""


class Arithmetic:
    """This party's side of the products and truncations. ``truncation`` is ``masked`` or
    ``local`` (Z_2^64 only; see the module's docstring)."""

    def __init__(self, party: Party, truncation: str = "masked") -> None:
        if truncation not in TRUNCATIONS:
            raise ValueError(f"truncation is one of {', '.join(TRUNCATIONS)}, not {truncation!r}")
        self.party = party
        self.truncation = truncation

    # --- products -------------------------------------------------------------------------

    def mul(self, x: torch.Tensor, y: torch.Tensor, ring: Ring) -> torch.Tensor:
        """Elementwise (broadcasting) product; fixed-point scales add up (no truncation)."""
        return self.mul_many([(x, y)], ring)[0][0]

    def square(self, x: torch.Tensor, ring: Ring) -> torch.Tensor:
        return self.mul_many([(x, None)], ring)[0][0]

    def matmul(self, x: torch.Tensor, y: torch.Tensor, ring: Ring) -> torch.Tensor:
        req = Request(Kind.MATMUL, ring.bits, tuple(x.shape), tuple(y.shape))
        a, b, c = self.party.provider.get(req)
        e, f = self.party.open(x - a, y - b)
        return self.matmul_of_masked(e, a, f, b, c)

    def matmul_of_masked(
        self, e: torch.Tensor, a: torch.Tensor, f: torch.Tensor, b: torch.Tensor, c: torch.Tensor
    ) -> torch.Tensor:
        """Share of x @ y from the opened e = x - a, f = y - b and the triple's c = a @ b:
        party 0 folds the public e @ f into e @ (b + f), two products for either party."""
        return c + e @ (b + f if self.party.index == 0 else b) + a @ f

    def matmul_pair(
        self, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor, ring: Ring
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x @ y and y @ w in one round, y opened once for both (x: (n, m), y: (m, k),
        w: (k, n): the shapes of a linear layer's x^T, dz and W^T)."""
        req = Request(Kind.MATMUL_PAIR, ring.bits, tuple(x.shape), tuple(y.shape))
        a, b, ab, d, bd = self.party.provider.get(req)
        e, f, g = self.party.open(x - a, y - b, w - d)
        first = self.party.index == 0
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
        provider = self.party.provider
        items: list[list[torch.Tensor]] = []
        masked: list[torch.Tensor] = []
        for x, y in pairs:
            if y is None:
                items.append(provider.get(Request(Kind.SQUARE, ring.bits, tuple(x.shape))))
                masked.append(x - items[-1][0])
            else:
                req = Request(Kind.MUL, ring.bits, tuple(x.shape), tuple(y.shape))
                items.append(provider.get(req))
                masked += [x - items[-1][0], y - items[-1][1]]
        opened = self.party.open(*masked, *also)
        first = self.party.index == 0
        products, at = [], 0
        for item in items:
            if len(item) == 2:
                a, aa = item
                e = opened[at]
                z = aa + 2 * e * a
                products.append(z + e * e if first else z)
                at += 1
            else:
                a, b, c = item
                e, f = opened[at], opened[at + 1]
                z = c + e * b + a * f
                products.append(z + e * f if first else z)
                at += 2
        return products, opened[at:]

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
        return z + e_x * e_y if self.party.index == 0 else z

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
            bit_factors = tuple(f.bit for f in group)
            req = Request(Kind.PRODUCT, ring.bits, shape, bit_factors=bit_factors)
            item = self.party.provider.get(req)
            n_bits = sum(bit_factors)
            bit_masks, subsets = iter(item[:n_bits]), item[n_bits:]
            for i, f in enumerate(group):
                masked.append(
                    f.value ^ next(bit_masks) if f.bit else f.value - subsets[(1 << i) - 1]
                )
            items.append((group, subsets))
        opened = iter(self.party.open_mixed(*masked))
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
            out.append(total + coeff[0] if self.party.index == 0 else total)
        return out

    # --- truncation and public scaling ----------------------------------------------------

    def mul_public(self, x: torch.Tensor, value: float, ring: Ring) -> torch.Tensor:
        """x times a public real, truncated back to x's scale."""
        factor = round(value * ring.scale)
        return self.trunc(x * factor, ring.frac, ring)

    def trunc(self, x: torch.Tensor, shift: int, ring: Ring, large: bool = False) -> torch.Tensor:
        """Secure right shift by ``shift`` bits: floor(x / 2^shift), plus one with probability
        (x mod 2^shift) / 2^shift (the masked low bits carry), i.e. stochastic rounding.
        ``large``: x may exceed 2^LOCAL_RANGE_BITS, so it is masked even where truncation is
        local."""
        return self.trunc_each([x], [shift], ring, large)[0]

    def trunc_each(
        self, xs: list[torch.Tensor], shifts: list[int], ring: Ring, large: bool = False
    ) -> list[torch.Tensor]:
        """``trunc`` of each tensor by its own shift, all in one round (none when local)."""
        if self.truncation == "local" and ring.bits == 64 and not large:
            return [self.trunc_local(x, shift) for x, shift in zip(xs, shifts, strict=True)]
        party, bits = self.party, ring.bits
        offset = 1 << (bits - 2)
        todo = [i for i, shift in enumerate(shifts) if shift]
        items = [
            party.provider.get(Request(Kind.TRUNC, bits, tuple(xs[i].shape), shift=shifts[i]))
            for i in todo
        ]
        masked = [
            party.add_public(xs[i], ring.encode_int(offset)) + item[0]
            for i, item in zip(todo, items, strict=True)
        ]
        out = list(xs)
        if not todo:
            return out
        for i, item, c in zip(todo, items, party.open(*masked), strict=True):
            _r, r_high, r_msb = item
            shift = shifts[i]
            wrap = r_msb * (1 - ring.msb(c))
            low = (wrap << (bits - shift)) - r_high
            out[i] = party.add_public(low, ring.high_bits(c, shift) - (offset >> shift))
        return out

    def trunc_local(self, x: torch.Tensor, shift: int) -> torch.Tensor:
        """floor(x / 2^shift) (plus one, as ``trunc``) without a round: x_0 >> d and
        -((-x_1) >> d); off by 2^(l - shift) when the shares' signed sum wraps."""
        if not shift:
            return x
        if self.party.index == 0:
            return x >> shift
        return -((-x) >> shift)

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
