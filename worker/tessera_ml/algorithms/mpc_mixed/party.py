"""One compute party's place in the protocols: its index, its link to the other party, its
source of dealer material, and how it shares public values and opens masked ones.

A shared value x in a ring is held as x_0 + x_1 = x (mod 2^bits), or, for bits, as
x_0 XOR x_1. Public constants are added by party 0 alone.
"""

from __future__ import annotations

import torch

from tessera_ml.algorithms.mpc_mixed.providers import Provider
from tessera_ml.comm.peer import Peer


class Party:
    """Compute party ``index`` (0 or 1): what every protocol builds on."""

    def __init__(self, index: int, peer: Peer, provider: Provider) -> None:
        if index not in (0, 1):
            raise ValueError("a compute party index is 0 or 1")
        self.index = index
        self.peer = peer
        self.provider = provider

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

    def open_mixed(self, *xs: torch.Tensor) -> list[torch.Tensor]:
        """Open shares of both kinds in one round: uint8 tensors are XOR shares, the rest
        additive."""
        theirs = self.peer.exchange(*xs)
        return [x ^ t if x.dtype == torch.uint8 else x + t for x, t in zip(xs, theirs, strict=True)]

    def reveal(self, x: torch.Tensor) -> torch.Tensor:
        return self.open(x)[0]
