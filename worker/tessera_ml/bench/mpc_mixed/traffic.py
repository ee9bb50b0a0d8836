"""Online bytes and rounds of one training step, by where in the model each opening happens.

``python -m tessera_ml.bench.mpc_mixed.traffic [--hidden 64] [--batch 64]
[--comparison tree|fan_in] [--truncation masked|local] [--ops]`` runs one step
of the digits MLP with batch norm on two in-process parties, in every mode, and prints what
compute party 0 sends, grouped by the model-level function and the protocol that opened it.
With ``--ops`` it also counts party 0's torch operations (every call that reaches torch's
function dispatch) at each site: over a fast link, a step's time is mostly their cost. It also
prints what a dealer rank would send compute party 1 for the step (its shares of every slot but
the masks, ``dealer.bundle_bytes``) against all of party 1's shares.
"""

from __future__ import annotations

import argparse
import traceback
from collections import Counter
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from tessera_ml.algorithms import mpc_mixed
from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.dealer import bundle_bytes
from tessera_ml.algorithms.mpc_mixed.local import engines, share_inputs
from tessera_ml.algorithms.mpc_mixed.material import layout, slot_bytes
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp, init_params, train_step
from tessera_ml.algorithms.mpc_mixed.precision import MODES, Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.providers import Provider
from tessera_ml.algorithms.mpc_mixed.request import Request
from tessera_ml.comm.peer import Peer, run_pair

_HERE = Path(mpc_mixed.__file__).parent  # the algorithm's modules, whose frames name a site
_PROTOCOLS = ("protocols.py", "party.py", "arithmetic.py", "conversion.py", "wide.py", "binary.py")
"""The engine's modules: the outermost frame in one of them names the protocol."""
_NOT_SITES = (*_PROTOCOLS, "traffic.py")
_OFFLINE = (
    "dealer.py",
    "providers.py",
    "material.py",
    "material_kind.py",
    "material_beaver.py",
    "material_rings.py",
    "material_bits.py",
)


def _site() -> str | None:
    """'module:function / protocol' of the exchange or operation being made; None inside the
    in-process dealer (its work is the offline phase's)."""
    frames = [f for f in traceback.extract_stack() if Path(f.filename).parent == _HERE]
    if any(f.filename.endswith(_OFFLINE) for f in frames):
        return None
    protocol = next((f.name for f in frames if f.filename.endswith(_PROTOCOLS)), "-")
    outer = [f for f in frames if not f.filename.endswith(_NOT_SITES)]
    where = f"{Path(outer[-1].filename).name}:{outer[-1].name}" if outer else "?"
    return f"{where} / {protocol}"


class _Counting:
    """Counts a peer's sends by site."""

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.bytes: Counter[str] = Counter()
        self.rounds: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()
        self.material: _CountingMaterial | None = None
        peer.on_exchange = self._count

    def _count(self, tensors: list[torch.Tensor]) -> None:
        site = _site() or "?"
        self.bytes[site] += sum(t.numel() * t.element_size() for t in tensors)
        self.rounds[site] += 1


class _CountingMaterial(Provider):
    """Party 1's provider, counting the bytes of the material it is given: what a dealer rank
    would send (``sent``) and all of its shares (``shares``)."""

    def __init__(self, inner: Provider) -> None:
        self.inner, self.stats = inner, inner.stats
        self.sent = self.shares = 0
        self.requests: list[Request] = []
        """The step's items, in the order asked: the schedule a dealer rank would replay."""

    def get(self, req: Request) -> list[torch.Tensor]:
        self.requests.append(req)
        self.sent += bundle_bytes([req])
        self.shares += sum(slot_bytes(slot) for slot in layout(req))
        return self.inner.get(req)


class _CountingOps(TorchFunctionMode):
    """Counts this thread's torch operations by site (modes are per thread)."""

    def __init__(self, ops: Counter[str]) -> None:
        super().__init__()
        self.ops = ops

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        site = _site()
        if site is not None:
            self.ops[site] += 1
        return func(*args, **(kwargs or {}))


def one_step(
    mode: str,
    hidden: int,
    batch: int,
    comparison: str = "tree",
    ops: bool = False,
    truncation: str = "masked",
) -> _Counting:
    prec = Precision.of(mode, 12, 20)
    x = data.features("sklearn:digits").train[:batch]
    labels, classes = data.labels("sklearn:digits")
    onehot = torch.nn.functional.one_hot(labels.train[:batch], classes).double()
    params = init_params([x.shape[1], hidden, classes], True, 0)
    xf, xb, yb = share_inputs(prec, x, onehot, 1000)

    e0, e1 = engines(0, comparison=comparison, truncation=truncation)
    counting = _Counting(e0.peer)
    counting.material = e1.provider = _CountingMaterial(e1.provider)

    def party(eng: Engine, i: int) -> None:
        model = SharedMlp.from_plain(eng, params, prec.backward, True)
        with _CountingOps(counting.ops) if ops and i == 0 else nullcontext():
            train_step(eng, prec, model, xf[i], xb[i], yb[i], 0.5)

    run_pair(party, (e0, 0), (e1, 1))
    return counting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--comparison", choices=["tree", "fan_in"], default="tree")
    parser.add_argument("--truncation", choices=["masked", "local"], default="masked")
    parser.add_argument("--ops", action="store_true", help="also count party 0's torch operations")
    args = parser.parse_args()
    for mode in MODES:
        if mode == "all32" and args.truncation == "local":
            continue  # no Z_2^64 truncation to make local
        counting = one_step(
            mode, args.hidden, args.batch, args.comparison, args.ops, args.truncation
        )
        total = sum(counting.bytes.values())
        line = f"{mode}: {total:,} bytes, {sum(counting.rounds.values())} rounds"
        if args.ops:
            line += f", {sum(counting.ops.values()):,} torch operations"
        print(line)
        for site, sent in counting.bytes.most_common():
            print(f"  {sent:>9,}  {counting.rounds[site]:>3} rounds  {site}")
        if counting.material is not None:
            material = counting.material
            print(
                f"  offline, dealer -> party 1: {material.sent:,} bytes "
                f"of the {material.shares:,} of party 1's shares"
            )
        if args.ops:
            print("  torch operations by site:")
            for site, n in counting.ops.most_common():
                print(f"  {n:>9,}  {site}")


if __name__ == "__main__":
    main()
