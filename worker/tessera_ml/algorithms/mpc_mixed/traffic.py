"""Online bytes and rounds of one training step, by where in the model each opening happens.

``python -m tessera_ml.algorithms.mpc_mixed.traffic [--hidden 64] [--batch 64]
[--comparison tree|fan_in]`` runs one step
of the digits MLP with batch norm on two in-process parties, in every mode, and prints what
compute party 0 sends, grouped by the model-level function and the protocol that opened it.
"""

from __future__ import annotations

import argparse
import traceback
from collections import Counter
from pathlib import Path

import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.channel import Peer, run_pair
from tessera_ml.algorithms.mpc_mixed.local import engines, share_inputs
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp, init_params, train_step
from tessera_ml.algorithms.mpc_mixed.precision import MODES, Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine

_HERE = Path(__file__).parent
_NOT_SITES = ("protocols.py", "channel.py", "traffic.py")


def _site() -> str:
    """'module:function / protocol' of the exchange being made."""
    frames = [f for f in traceback.extract_stack() if Path(f.filename).parent == _HERE]
    protocol = next((f.name for f in frames if f.filename.endswith("protocols.py")), "-")
    outer = [f for f in frames if not f.filename.endswith(_NOT_SITES)]
    where = f"{Path(outer[-1].filename).name}:{outer[-1].name}" if outer else "?"
    return f"{where} / {protocol}"


class _Counting:
    """Counts a peer's sends by site."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.bytes: Counter[str] = Counter()
        self.rounds: Counter[str] = Counter()
        peer.on_exchange = self._count

    def _count(self, tensors: list[torch.Tensor]) -> None:
        site = _site()
        self.bytes[site] += sum(t.numel() * t.element_size() for t in tensors)
        self.rounds[site] += 1


def one_step(mode: str, hidden: int, batch: int, comparison: str = "tree") -> _Counting:
    prec = Precision.of(mode, 12, 20)
    x = data.features("sklearn:digits").train[:batch]
    labels, classes = data.labels("sklearn:digits")
    onehot = torch.nn.functional.one_hot(labels.train[:batch], classes).double()
    params = init_params([x.shape[1], hidden, classes], True, 0)
    xf, xb, yb = share_inputs(prec, x, onehot, 1000)

    def party(eng: Engine, i: int) -> None:
        model = SharedMlp.from_plain(eng, params, prec.backward, True)
        train_step(eng, prec, model, xf[i], xb[i], yb[i], 0.5)

    e0, e1 = engines(0, comparison=comparison)
    counting = _Counting(e0.peer)
    run_pair(party, (e0, 0), (e1, 1))
    return counting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--comparison", choices=["tree", "fan_in"], default="tree")
    args = parser.parse_args()
    for mode in MODES:
        counting = one_step(mode, args.hidden, args.batch, args.comparison)
        total = sum(counting.bytes.values())
        print(f"{mode}: {total:,} bytes, {sum(counting.rounds.values())} rounds")
        for site, sent in counting.bytes.most_common():
            print(f"  {sent:>9,}  {counting.rounds[site]:>3} rounds  {site}")


if __name__ == "__main__":
    main()
