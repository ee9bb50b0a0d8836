"""Wide products: factors in Z_2^32, product exact in Z_2^64, in one round.

Each Z_2^32 factor is opened as for an extension, c = x + 2^30 + r, so x = P - R + 2^32 D m with
P = c - 2^30 and D = 1 - msb(c) public, and R (r unsigned) and m = msb(r) the dealer's. Every
term of a product is then a public coefficient times a dealer value or a product of dealer
values, which the dealer shares in Z_2^64; a shift-and-reduce back to Z_2^32 then truncates for
free.
"""

from __future__ import annotations

import torch

from tessera_ml.algorithms.mpc_mixed.conversion import extended
from tessera_ml.algorithms.mpc_mixed.party import Party
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.algorithms.mpc_mixed.ring import ring_sum


class Wide:
    """This party's side of the wide products."""

    def __init__(self, party: Party) -> None:
        self.party = party

    def wide_mul(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
        """x * y (or x * x) of Z_2^32 shares as Z_2^64 shares, exact (|x|, |y| < 2^30)."""
        assert x.dtype == torch.int32 and (y is None or y.dtype == torch.int32)
        party = self.party
        item = party.provider.get(Request(Kind.WIDE_MUL, 64, tuple(x.shape), square=y is None))
        if y is None:
            r, big, m, big_big, big_m = item
            (c,) = party.open(party.add_public(x, 1 << 30) + r)
            p, w = _public_parts(c)
            z = big_big - 2 * p * big + ((w * (p * m - big_m)) << 33)
            return party.add_public(z, p * p)
        # x and y side by side: index 0 is x, 1 is y, and flip(0) pairs each with the other
        r, big, m, xy, cross = item
        (c,) = party.open(party.add_public(torch.stack([x, y]), 1 << 30) + r)
        p, w = _public_parts(c)
        other_p = p.flip(0)
        # P_x R_y + P_y R_x, and the terms carrying 2^32 (the one in m_x m_y carries 2^64)
        terms = ((other_p * w * m - w.flip(0) * cross) << 32) - other_p * big
        return party.add_public(xy + ring_sum(terms, 0), p.prod(0))

    def wide_matmul(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x @ w for x in Z_2^32 (|x| < 2^30) and w in Z_2^64, exact in Z_2^64, and x extended
        to Z_2^64: one round (x opened as for an extension, w as w - b).

        With x = P - R + 2^32 (D * m) (P, D public after the opening): P @ w is local,
        R @ w = R @ (w - b) + R @ b with the dealer's R @ b, and (D * m) @ w needs, besides
        (D * m) @ (w - b), the sums over i of D_ik m_ik b_kj, from the dealer's m_ik b_kj
        modulo 2^32 (the term carries 2^32). That term is therefore computed in Z_2^32, where
        torch's products are many times cheaper than in int64."""
        assert x.dtype == torch.int32 and w.dtype == torch.int64
        party = self.party
        req = Request(Kind.WIDE_MATMUL, 64, tuple(x.shape), tuple(w.shape))
        r, big, m, b, big_b, m_b = party.provider.get(req)
        c, f = party.open(party.add_public(x, 1 << 30) + r, w - b)
        p, d = _public_parts(c)
        d32 = d.to(torch.int32)
        wrap = (d32 * m.to(torch.int32)) @ f.to(torch.int32)
        wrap += ring_sum(d32.unsqueeze(-1) * m_b, 1)
        z = p @ w - big @ f - big_b + (wrap.to(torch.int64) << 32)
        return z, extended(party, c, big, m, 0)


def _public_parts(c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """From an opened c = x + 2^30 + r (mod 2^32): c - 2^30 and 1 - msb(c), in Z_2^64."""
    unsigned = c.to(torch.int64) & 0xFFFFFFFF
    return unsigned - (1 << 30), 1 - (unsigned >> 31)
