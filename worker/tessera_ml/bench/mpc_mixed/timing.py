"""Where a training step's CPU time goes, protocol by protocol, in ``mixed`` and ``all64``.

``python -m tessera_ml.bench.mpc_mixed.timing [--steps 40] [--batch 128] [--hidden 64]
[--spin-us 300] [--comparison tree|fan_in] [--all64-comparison tree|fan_in]
[--mixed-truncation masked|local] [--all64-truncation local|masked]`` runs the two
compute parties of the digits MLP with batch norm as two processes joined by the direct link
(``pair_link.open_link``), as a job does, but without the dealer, features and labels ranks: both
processes draw every step's material from one seed before the step, so no step waits for
material, and nothing here is secret (a timing tool, not a protocol). The two modes take turns
step by step in the same processes, so a change in the machine's load reaches both alike.
``all64`` truncates locally and ``mixed`` masks its truncations unless told otherwise; both use
``--comparison`` unless ``--all64-comparison`` names another for ``all64`` (the benchmark's
candidates, e.g. ``mixed_local_tree`` against ``all64_local_fan_in``).

For each mode it prints the median step (wall and CPU time of the slower party), how many times
that party slept in ``poll`` waiting for the other (``--spin-us`` sets how long the link retries
a round first; 0 sleeps at once), the CPU time spent in the link's exchanges, and the CPU time
per step inside each protocol (the outermost ``Engine`` call; exchanges inside it are not
counted there), with calls per step. The first two steps of each mode are left out (the first
records the material schedule).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.local import share_inputs
from tessera_ml.algorithms.mpc_mixed.material import deal
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp, init_params, train_step
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.prg import KEY_BYTES, Prg
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.providers import RecordingProvider
from tessera_ml.algorithms.mpc_mixed.request import Request
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.pair_link import open_link
from tessera_ml.comm.peer import SPIN_S, Peer
from tessera_ml.worlds import run_world

MODES = ("mixed", "all64")
WARMUP_STEPS = 2
EXCHANGE = "(exchange)"
PROTOCOLS = (
    "arith.matmul",
    "convert.matmul_extend",
    "arith.matmul_pair",
    "arith.mul_many",
    "arith.products",
    "arith.product_of_masked",
    "arith.mul_public",
    "arith.trunc_each",
    "convert.trunc_extend",
    "wide.wide_mul",
    "wide.wide_matmul",
    "convert.trunc_reduce",
    "binary.nonneg_bit",
    "binary.share_bit",
    "binary.mul_bit",
    "open",
    "open_xor",
    "add_public",
)
"""Engine methods timed, by their path from the engine, each reported under its name; a call
inside another (``trunc_each`` inside ``mul_public``) counts for the outer one."""


class ReplayProvider(RecordingProvider):
    """Both parties deal the same material from the same seeds, as the dealer would; each keeps
    its own shares. Only for timing: either process could rebuild the other's shares."""

    def __init__(self, party: int, seed: int = 0) -> None:
        super().__init__()
        self._party = party
        self._prg0, self._prg1 = (Prg.derived(bytes(KEY_BYTES), seed, p) for p in (0, 1))

    def _draw(self, req: Request) -> list[torch.Tensor]:
        return deal(req, self._prg0, self._prg1)[self._party]

    def _fetch(self, req: Request) -> list[torch.Tensor]:
        return self._draw(req)

    def _prepare(self, key: int, schedule: list[Request]) -> list[list[torch.Tensor]]:
        return [self._draw(r) for r in schedule]


@dataclass
class _Clock:
    """CPU time and calls per protocol of the step being timed."""

    cpu: dict[str, float] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    depth: int = 0
    in_exchange: float = 0.0

    def protocol(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return fn(*args, **kwargs)
            self.depth += 1
            start, exchanged = time.process_time(), self.in_exchange
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
                spent = time.process_time() - start - (self.in_exchange - exchanged)
                self.cpu[name] = self.cpu.get(name, 0.0) + spent
                self.calls[name] += 1

        return timed

    def exchange(self, fn: Callable[..., list[torch.Tensor]]) -> Callable[..., list[torch.Tensor]]:
        def timed(*tensors: torch.Tensor) -> list[torch.Tensor]:
            start = time.process_time()
            try:
                return fn(*tensors)
            finally:
                spent = time.process_time() - start
                self.in_exchange += spent
                self.cpu[EXCHANGE] = self.cpu.get(EXCHANGE, 0.0) + spent
                self.calls[EXCHANGE] += 1

        return timed


def _timed_engine(
    index: int, peer: Peer, clock: _Clock, comparison: str, truncation: str
) -> Engine:
    eng = Engine(index, peer, ReplayProvider(index), comparison, truncation)
    for path in PROTOCOLS:
        *parts, name = path.split(".")
        owner: object = eng
        for part in parts:
            owner = getattr(owner, part)
        setattr(owner, name, clock.protocol(name, getattr(owner, name)))
    return eng


@dataclass
class StepTimes:
    """One party's steps in one mode: wall and CPU time, and the clock's split of each."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    protocols: list[dict[str, float]] = field(default_factory=list)
    calls: list[dict[str, int]] = field(default_factory=list)
    sleeps: list[int] = field(default_factory=list)


@torch.inference_mode()  # as the job's ranks run (``train.run``)
def _party(
    comm: Communicator,
    steps: int,
    batch: int,
    hidden: int,
    spin_s: float,
    comparisons: dict[str, str],
    truncations: dict[str, str],
) -> dict[str, StepTimes]:
    index = comm.rank
    peer, fell_back = open_link(comm, index, 1 - index, "direct", spin_s=spin_s)
    if fell_back is not None:
        raise RuntimeError(f"the direct link could not be made: {fell_back}")
    clock = _Clock()
    peer.exchange = clock.exchange(peer.exchange)  # type: ignore[method-assign]
    x = data.features("sklearn:digits").train
    labels, classes = data.labels("sklearn:digits")
    onehot = torch.nn.functional.one_hot(labels.train, classes).to(torch.float64)
    params = init_params([x.shape[1], hidden, classes], True, 0)
    parties = {}
    for mode in MODES:
        prec = Precision.of(mode, 12, 20)
        eng = _timed_engine(index, peer, clock, comparisons[mode], truncations[mode])
        parties[mode] = (prec, eng, SharedMlp.from_plain(eng, params, prec.backward, True))
    times = {mode: StepTimes() for mode in MODES}
    rows = x.shape[0] - batch
    try:
        for step in range(steps + WARMUP_STEPS):
            at = (step * batch) % rows
            for mode in MODES if step % 2 == 0 else MODES[::-1]:
                prec, eng, model = parties[mode]
                xf, xb, yb = share_inputs(prec, x[at : at + batch], onehot[at : at + batch], step)
                eng.provider.begin(1)
                peer.barrier()
                clock.cpu.clear()
                clock.calls.clear()
                slept = peer.stats.sleeps
                wall, cpu = time.perf_counter(), time.process_time()
                train_step(eng, prec, model, xf[index], xb[index], yb[index], 0.5)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                eng.provider.end()
                if step >= WARMUP_STEPS:
                    out = times[mode]
                    out.wall.append(wall)
                    out.cpu.append(cpu)
                    out.protocols.append(dict(clock.cpu))
                    out.calls.append(dict(clock.calls))
                    out.sleeps.append(peer.stats.sleeps - slept)
    finally:
        peer.close()
    return times


@dataclass(frozen=True)
class ModeTiming:
    """Medians over the steps, each step taken at the slower party."""

    step_wall_s: float
    step_cpu_s: float
    cpu_s: dict[str, float]
    calls: dict[str, float]
    sleeps: float
    """Times the slower party slept in ``poll`` during the step."""


def time_modes(
    steps: int = 40,
    batch: int = 128,
    hidden: int = 64,
    spin_s: float = SPIN_S,
    comparison: str = "tree",
    all64_truncation: str = "local",
    mixed_truncation: str = "masked",
    all64_comparison: str | None = None,
) -> dict[str, ModeTiming]:
    comparisons = {"mixed": comparison, "all64": all64_comparison or comparison}
    truncations = {"mixed": mixed_truncation, "all64": all64_truncation}
    per_party: list[dict[str, StepTimes]] = run_world(
        _party, 2, steps, batch, hidden, spin_s, comparisons, truncations
    )
    out = {}
    for mode in MODES:
        a, b = per_party[0][mode], per_party[1][mode]
        # each step at the party whose wall time was longer
        chosen = [a if wa >= wb else b for wa, wb in zip(a.wall, b.wall, strict=True)]
        names = sorted({n for t in (a, b) for p in t.protocols for n in p})
        out[mode] = ModeTiming(
            step_wall_s=statistics.median(max(pair) for pair in zip(a.wall, b.wall, strict=True)),
            step_cpu_s=statistics.median(t.cpu[i] for i, t in enumerate(chosen)),
            sleeps=statistics.median(t.sleeps[i] for i, t in enumerate(chosen)),
            cpu_s={
                n: statistics.median(t.protocols[i].get(n, 0.0) for i, t in enumerate(chosen))
                for n in names
            },
            calls={
                n: statistics.median(t.calls[i].get(n, 0) for i, t in enumerate(chosen))
                for n in names
            },
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--comparison", choices=["tree", "fan_in"], default="tree")
    parser.add_argument("--all64-comparison", choices=["tree", "fan_in"], default=None)
    parser.add_argument("--all64-truncation", choices=["masked", "local"], default="local")
    parser.add_argument("--mixed-truncation", choices=["masked", "local"], default="masked")
    parser.add_argument(
        "--spin-us",
        type=float,
        default=SPIN_S * 1e6,
        help="how long the link retries a round before sleeping (microseconds)",
    )
    args = parser.parse_args()
    timings = time_modes(
        args.steps,
        args.batch,
        args.hidden,
        args.spin_us * 1e-6,
        args.comparison,
        args.all64_truncation,
        args.mixed_truncation,
        args.all64_comparison,
    )
    mixed, all64 = timings["mixed"], timings["all64"]
    print(
        f"{args.steps} steps per mode, batch {args.batch}, hidden {args.hidden}, "
        f"retrying {args.spin_us:.0f} us before sleeping; medians per step, times in ms"
    )
    print(f"{'':22} {'mixed':>16} {'all64':>16}")
    print(f"{'step wall':22} {mixed.step_wall_s * 1e3:16.2f} {all64.step_wall_s * 1e3:16.2f}")
    print(f"{'step CPU':22} {mixed.step_cpu_s * 1e3:16.2f} {all64.step_cpu_s * 1e3:16.2f}")
    print(f"{'sleeps in poll':22} {mixed.sleeps:16.0f} {all64.sleeps:16.0f}")
    names = sorted(
        set(mixed.cpu_s) | set(all64.cpu_s),
        key=lambda n: -(mixed.cpu_s.get(n, 0.0) + all64.cpu_s.get(n, 0.0)),
    )
    for n in names:
        cells = [
            f"{t.cpu_s.get(n, 0.0) * 1e3:8.2f} ({t.calls.get(n, 0):4.0f})" for t in (mixed, all64)
        ]
        print(f"{n:22} {cells[0]:>16} {cells[1]:>16}")
    print(
        f"ratios mixed / all64: wall {mixed.step_wall_s / all64.step_wall_s:.3f}, "
        f"CPU {mixed.step_cpu_s / all64.step_cpu_s:.3f}"
    )


if __name__ == "__main__":
    main()
