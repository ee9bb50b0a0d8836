"""How often local truncation would go wrong in training steps.

Local truncation (``truncation: local``) is off by 2^(64 - d) when the two shares' signed sum
wraps, which for party 0's uniform share happens with probability |x| / 2^64 per element. This
runs steps of the digits MLP on two in-process parties, reads every value they truncate
locally from both shares (only possible here, where one process holds both), and sums that
probability: the expected number of wrong truncations per step. It runs a job's first
``--steps`` steps (one unless told: the first batch, from the initial weights), its batches in
the job's order for its ``--seed``, at its ``--learning-rate``, and gives the mean over them
and the largest step's. The benchmark runs a job's every step this way.

``python -m tessera_ml.bench.mpc_mixed.wraps [--mode all64] [--batch 128] [--hidden 64]
[--comparison tree] [--steps 1] [--seed 0] [--learning-rate 0.5]``
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
    """Wrong truncations that happened in these steps."""
    steps: int = 1
    largest_per_step: float = 0.0
    """The largest step's expected wrong truncations."""


def job_rows(n: int, batch: int, steps: int, seed: int) -> list[torch.Tensor]:
    """The row indices of a job's first ``steps`` batches, in its order (``data.step_rows``)."""
    if steps < 1:
        raise ValueError(f"the risk is taken over at least one step, not {steps}")
    if batch > n:  # said in the command line's terms; data.step_rows refuses an empty batch
        raise ValueError(f"a batch of {batch} is more than the {n} training rows")
    return [data.step_rows(n, batch, step, seed) for step in range(steps)]


def wrap_risk(
    mode: str = "all64",
    batch: int = 128,
    hidden: int = 64,
    comparison: str = "tree",
    steps: int = 1,
    seed: int = 0,
    learning_rate: float = 0.5,
) -> WrapRisk:
    prec = Precision.of(mode, 12, 20)
    features = data.features("sklearn:digits").train
    labels, classes = data.labels("sklearn:digits")
    onehot = torch.nn.functional.one_hot(labels.train, classes).double()
    params = init_params([features.shape[1], hidden, classes], True, seed)
    rows = job_rows(features.shape[0], batch, steps, seed)
    shared = [
        share_inputs(prec, features[idx], onehot[idx], 1000 + i) for i, idx in enumerate(rows)
    ]
    seen: list[list[torch.Tensor]] = [[], []]
    step_of: list[int] = []
    lock = threading.Lock()

    def record(eng: Engine) -> None:
        local = eng.arith.trunc_local

        def recorded(v: torch.Tensor, shift: int) -> torch.Tensor:
            with lock:
                seen[eng.index].append(v.clone())
                if eng.index == 0:
                    step_of.append(current[0])
            return local(v, shift)

        eng.arith.trunc_local = recorded  # type: ignore[method-assign,assignment]

    current = [0]  # the step party 0 is in
    e0, e1 = engines(0, comparison=comparison, truncation="local")
    for eng in (e0, e1):
        record(eng)

    def party(eng: Engine, i: int) -> None:
        model = SharedMlp.from_plain(eng, params, prec.backward, True, seed)
        for step, (xf, xb, yb) in enumerate(shared):
            if i == 0:
                current[0] = step
            train_step(eng, prec, model, xf[i], xb[i], yb[i], learning_rate)

    run_pair(party, (e0, 0), (e1, 1))
    return _risk(seen[0], seen[1], step_of, len(rows))


def _risk(
    first: list[torch.Tensor], second: list[torch.Tensor], step_of: list[int], steps: int
) -> WrapRisk:
    """From both parties' shares of each locally truncated value, in the order truncated, and
    the step of each."""
    per_step = [0.0] * steps
    elements, largest, wrong = 0, 0, 0
    for a, b, step in zip(first, second, step_of, strict=True):
        x = a + b
        per_step[step] += float((x.double().abs() / 2.0**64).sum())
        elements += x.numel()
        largest = max(largest, int(x.abs().max()).bit_length())
        # the signed sum of the shares, exactly: wrapped when it leaves the int64 range
        exact = a.double() + b.double()
        wrong += int(((exact - x.double()).abs() > 2.0**62).sum())
    return WrapRisk(sum(per_step) / steps, elements // steps, largest, wrong, steps, max(per_step))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["all64", "mixed"], default="all64")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--comparison", choices=["tree", "fan_in"], default="tree")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=0.5)
    args = parser.parse_args()
    try:
        risk = wrap_risk(
            args.mode,
            args.batch,
            args.hidden,
            args.comparison,
            args.steps,
            args.seed,
            args.learning_rate,
        )
    except ValueError as e:
        parser.error(str(e))
    print(
        f"{args.mode}, batch {args.batch}, {risk.steps} step(s): {risk.elements:,} elements "
        f"truncated locally per step, the largest below 2^{risk.largest_bits}; expected wrong "
        f"truncations per step {risk.expected_per_step:.2e} (the largest step's "
        f"{risk.largest_per_step:.2e}; over the steps {risk.expected_per_step * risk.steps:.3f}; "
        f"seen: {risk.seen})"
    )


if __name__ == "__main__":
    main()
