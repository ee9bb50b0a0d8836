"""What the dealer rank's work costs per training step, job by job and kind by kind.

``python -m tessera_ml.bench.mpc_mixed.dealing [--batch 128] [--hidden 64] [--runs 30]``
records one training step's items in each of the benchmark's jobs (``bench.JOBS``; the
``gloo`` job deals as ``mixed_tree`` does), then makes that step's bundle ``--runs`` times as
the dealer rank makes a replayed step's (``dealer._PhaseDraws``: both parties' seeded shares
drawn at once, party 1's sent shares computed into the bundle). It prints the median CPU time
of a bundle, of its draws, and of each kind of item, with the bundle's bytes. Where the dealer
shares a machine's cores with the compute parties (the benchmark on two cores), this is CPU
time their online phase does not get.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass

import torch

from tessera_ml.algorithms.mpc_mixed.dealer import _PhaseDraws, bundle_bytes
from tessera_ml.algorithms.mpc_mixed.material import deal_drawn
from tessera_ml.algorithms.mpc_mixed.prg import Prg
from tessera_ml.algorithms.mpc_mixed.request import Request
from tessera_ml.bench.mpc_mixed.bench import JOBS
from tessera_ml.bench.mpc_mixed.traffic import one_step

WARMUP_RUNS = 3


@dataclass(frozen=True)
class DealerCost:
    """Medians over the runs, in CPU seconds: one bundle, its draws, and each kind's items."""

    items: int
    bundle_bytes: int
    bundle_s: float
    draws_s: float
    kinds_s: dict[str, float]


def schedule(mode: str, comparison: str, truncation: str, batch: int, hidden: int) -> list[Request]:
    """The items one training step asks for, in order."""
    material = one_step(mode, hidden, batch, comparison, truncation=truncation).material
    assert material is not None
    return material.requests


@torch.inference_mode()  # as the dealer rank runs (``dealer.serve``)
def dealer_cost(reqs: list[Request], runs: int) -> DealerCost:
    draws = _PhaseDraws(reqs)
    bundles, drawing = [], []
    kinds: dict[str, list[float]] = defaultdict(list)
    for run in range(runs + WARMUP_RUNS):
        prg0, prg1 = Prg.fresh(), Prg.fresh()
        start = time.thread_time()
        draws.bundle(prg0, prg1)
        bundle = time.thread_time() - start
        # the same run again, timed part by part
        start = time.thread_time()
        draws._share0.draw(prg0)
        draws._masks1.draw(prg1)
        drawn = time.thread_time() - start
        per_kind: dict[str, float] = defaultdict(float)
        for req, share0, masks1, into in draws._items:
            start = time.thread_time()
            deal_drawn(req, share0, masks1, into)
            per_kind[req.kind.name] += time.thread_time() - start
        if run >= WARMUP_RUNS:
            bundles.append(bundle)
            drawing.append(drawn)
            for name in {req.kind.name for req in reqs}:
                kinds[name].append(per_kind[name])
    return DealerCost(
        items=len(reqs),
        bundle_bytes=bundle_bytes(reqs),
        bundle_s=statistics.median(bundles),
        draws_s=statistics.median(drawing),
        kinds_s={name: statistics.median(times) for name, times in kinds.items()},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the dealer rank's own setting
    print(f"batch {args.batch}, hidden {args.hidden}; medians of {args.runs} bundles, CPU ms")
    for name, job in JOBS.items():
        if job.transport != "mesh":
            continue  # deals as the job of its mode, comparison and truncation
        reqs = schedule(job.mode, job.comparison, job.truncation, args.batch, args.hidden)
        cost = dealer_cost(reqs, args.runs)
        print(
            f"{name:20s} bundle {cost.bundle_s * 1e3:6.2f}  draws {cost.draws_s * 1e3:5.2f}  "
            f"{cost.items} items  {cost.bundle_bytes:,} bytes"
        )
        for kind, seconds in sorted(cost.kinds_s.items(), key=lambda kv: -kv[1]):
            print(f"    {kind:12s} {seconds * 1e3:6.2f}")


if __name__ == "__main__":
    main()
