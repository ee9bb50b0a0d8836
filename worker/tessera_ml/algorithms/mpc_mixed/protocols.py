"""Two-party protocols on shares, one ``Engine`` per compute party.

The engine is the party itself (``Party``: sharing, opening, revealing) with the protocols
grouped by the kind of share they work on:

- ``arith`` (``arithmetic``): products and truncation of additive shares in one ring;
- ``convert`` (``conversion``): extension from Z_2^32 to Z_2^64, and reduction back;
- ``wide`` (``wide``): products of Z_2^32 factors, exact in Z_2^64;
- ``binary`` (``binary``): comparison on XOR-shared bits, and products by a secret bit.
"""

from __future__ import annotations

from tessera_ml.algorithms.mpc_mixed.arithmetic import Arithmetic
from tessera_ml.algorithms.mpc_mixed.binary import Binary
from tessera_ml.algorithms.mpc_mixed.conversion import Conversion
from tessera_ml.algorithms.mpc_mixed.party import Party
from tessera_ml.algorithms.mpc_mixed.providers import Provider
from tessera_ml.algorithms.mpc_mixed.wide import Wide
from tessera_ml.comm.peer import Peer


class Engine(Party):
    """This party's side of every protocol. ``index`` is 0 or 1; ``comparison`` combines the
    chunks of a comparison two per round (``tree``) or a level of groups per round
    (``fan_in``); ``truncation`` truncates Z_2^64 shares with a masked opening (``masked``)
    or each party on its own share (``local``)."""

    def __init__(
        self,
        index: int,
        peer: Peer,
        provider: Provider,
        comparison: str = "tree",
        truncation: str = "masked",
    ) -> None:
        super().__init__(index, peer, provider)
        self.arith = Arithmetic(self, truncation)
        self.convert = Conversion(self, self.arith)
        self.wide = Wide(self)
        self.binary = Binary(self, comparison)
