"""Moving shares between Z_2^32 and Z_2^64.

Extension opens c = x + 2^30 + r (mod 2^32) for a dealer mask r whose top bit is also shared in
Z_2^64: the wrap of the addition, msb(r) * (1 - msb(c)), is then linear in the shares, and
x = c - r + 2^32 * wrap - 2^30 (so |x| < 2^30). Reduction is local in either direction: each
share keeps its low 32 bits, shifted first if the value is to be truncated.
"""

from __future__ import annotations

import torch

from tessera_ml.algorithms.mpc_mixed.arithmetic import Arithmetic
from tessera_ml.algorithms.mpc_mixed.party import Party
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.algorithms.mpc_mixed.ring import Ring


class Conversion:
    """This party's side of extension (one round) and reduction (local)."""

    def __init__(self, party: Party, arith: Arithmetic) -> None:
        self.party = party
        self.arith = arith

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
        party = self.party
        r32, r_high, r_msb = party.provider.get(
            Request(Kind.EXTEND, 64, tuple(x.shape), shift=shift)
        )
        c = party.reveal(party.add_public(x, 1 << 30) + r32)
        return extended(party, c, r_high, r_msb, shift)

    def matmul_extend(
        self, x: torch.Tensor, y: torch.Tensor, ring: Ring
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x @ y in Z_2^32 and x extended to Z_2^64, both openings in one round."""
        assert x.dtype == torch.int32
        party = self.party
        a, b, c = party.provider.get(
            Request(Kind.MATMUL, ring.bits, tuple(x.shape), tuple(y.shape))
        )
        r32, r64, r_msb = party.provider.get(Request(Kind.EXTEND, 64, tuple(x.shape)))
        e, f, masked = party.open(x - a, y - b, party.add_public(x, 1 << 30) + r32)
        return self.arith.matmul_of_masked(e, a, f, b, c), extended(party, masked, r64, r_msb, 0)

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
        if shift and self.party.index == 0:
            x = x + ((1 << shift) - 1)
        return (x >> shift).to(torch.int32)

    @staticmethod
    def reduce(x: torch.Tensor) -> torch.Tensor:
        """Z_2^64 -> Z_2^32: each share keeps its low 32 bits (exact modulo 2^32)."""
        assert x.dtype == torch.int64
        return x.to(torch.int32)


def extended(
    party: Party, c: torch.Tensor, r_high: torch.Tensor, r_msb: torch.Tensor, shift: int
) -> torch.Tensor:
    """Shares of x >> shift in Z_2^64 from the opened c = x + 2^30 + r (mod 2^32), the
    dealer's r >> shift and msb(r)."""
    offset = 1 << 30
    c_unsigned = c.to(torch.int64) & 0xFFFFFFFF
    wrap = r_msb * (1 - ((c_unsigned >> 31) & 1))
    out = (wrap << (32 - shift)) - r_high
    return party.add_public(out, (c_unsigned >> shift) - (offset >> shift))
