"""How often local truncation would go wrong in one training step.

Local truncation (``truncation: local``) is off by 2^(64 - d) when the two shares' signed sum
wraps, which for party 0's uniform share happens with probability |x| / 2^64 per element. This
runs one step of the digits MLP on two in-process parties, reads every value they truncate
locally from both shares (only possible here, where one process holds both), and sums that
probability: the expected number of wrong truncations per step.

``python -m tessera_ml.bench.mpc_mixed.wraps [--mode all64] [--batch 128] [--hidden 64]``
"""

from __future__ import annotations

import argparse
import threading
from dataclasses import dataclass

import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.local import engines, share_inputs
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp, init_params, train_step
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.comm.peer import run_pair


@dataclass(frozen=True)
class WrapRisk:
    expected_per_step: float
    """Sum over the step's locally truncated elements of |x| / 2^64."""
    elements: int
    largest_bits: int
    """Bit length of the largest |x| truncated locally."""
    seen: int
    """Wrong truncations that happened in this step."""


def wrap_risk(
    mode: str = "all64", batch: int = 128, hidden: int = 64, comparison: str = "tree"
) -> WrapRisk:
    prec = Precision.of(mode, 12, 20)
    x = data.features("sklearn:digits").train[:batch]
    labels, classes = data.labels("sklearn:digits")
    onehot = torch.nn.functional.one_hot(labels.train[:batch], classes).double()
    params = init_params([x.shape[1], hidden, classes], True, 0)
    xf, xb, yb = share_inputs(prec, x, onehot, 1000)
    seen: list[list[torch.Tensor]] = [[], []]
    lock = threading.Lock()

    def record(eng: Engine) -> None:
        local = eng.arith.trunc_local

        def recorded(v: torch.Tensor, shift: int) -> torch.Tensor:
            with lock:
                seen[eng.index].append(v.clone())
            return local(v, shift)

        eng.arith.trunc_local = recorded  # type: ignore[method-assign,assignment]

    e0, e1 = engines(0, comparison=comparison, truncation="local")
    for eng in (e0, e1):
        record(eng)

    def party(eng: Engine, i: int) -> None:
        model = SharedMlp.from_plain(eng, params, prec.backward, True)
        train_step(eng, prec, model, xf[i], xb[i], yb[i], 0.5)

    run_pair(party, (e0, 0), (e1, 1))
    return _risk(seen[0], seen[1])


def _risk(first: list[torch.Tensor], second: list[torch.Tensor]) -> WrapRisk:
    """From both parties' shares of each locally truncated value, in the order truncated."""
    expected, elements, largest, wrong = 0.0, 0, 0, 0
    for a, b in zip(first, second, strict=True):
        x = a + b
        expected += float((x.double().abs() / 2.0**64).sum())
        elements += x.numel()
        largest = max(largest, int(x.abs().max()).bit_length())
        # the signed sum of the shares, exactly: wrapped when it leaves the int64 range
        exact = a.double() + b.double()
        wrong += int(((exact - x.double()).abs() > 2.0**62).sum())
    return WrapRisk(expected, elements, largest, wrong)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["all64", "mixed"], default="all64")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--comparison", choices=["tree", "fan_in"], default="tree")
    args = parser.parse_args()
    risk = wrap_risk(args.mode, args.batch, args.hidden, args.comparison)
    print(
        f"{args.mode}, batch {args.batch}: {risk.elements:,} elements truncated locally per "
        f"step, the largest below 2^{risk.largest_bits}; expected wrong truncations per step "
        f"{risk.expected_per_step:.2e} (seen in this step: {risk.seen})"
    )


if __name__ == "__main__":
    main()
