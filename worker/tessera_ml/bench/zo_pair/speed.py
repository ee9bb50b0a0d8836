"""Step time against single-process and data-parallel MeZO, and peak step memory against
backprop, on two ranks.

``speed_world`` runs on a real two-rank world. Timing alternates step by step: rank 0 alone runs
a one-thread MeZO step over the same two inputs (rank 1 waits at a barrier), both ranks run a
data-parallel MeZO step, then a ``zo_pair`` step; medians over many alternations keep a drifting
machine load from favouring either side. MeZO with two threads is timed afterwards, and the
faster of the two thread counts is the baseline.

MeZO draws Gaussian z (``mezo_single_process_step_time_s``, the baseline as published); when
``zo_pair`` draws another distribution, MeZO is timed with that one as well
(``mezo_same_z_step_time_s``), which separates what the pairing buys from what the cheaper z buys.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from tessera_ml.algorithms.zo_pair.perturb import Distribution
from tessera_ml.algorithms.zo_pair.protocol import PairProcessor, Schedule
from tessera_ml.algorithms.zo_pair.seeds import direction_seed
from tessera_ml.bench.zo_pair.dp_mezo import DataParallelMezo
from tessera_ml.bench.zo_pair.memory import peak_step_bytes, tensor_bytes
from tessera_ml.bench.zo_pair.mezo import MezoStep
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.pair_link import open_link
from tessera_ml.comm.peer import Peer
from tessera_ml.models.zoo import build_model


@dataclass(frozen=True)
class SpeedSpec:
    in_features: int
    time_hidden: list[int]
    time_micro_batch: int
    memory_hidden: list[int]
    memory_micro_batch: int
    timed_steps: int
    warmup_steps: int = 3
    baseline_threads: int = 2
    perturbation: Distribution = "rademacher"


def _mlp(spec: SpeedSpec, hidden: list[int]) -> nn.Module:
    torch.manual_seed(0)
    model = build_model(
        {"kind": "mlp", "hidden": hidden, "in_features": spec.in_features, "out_features": 10}
    )
    return model.eval()


def _inputs(spec: SpeedSpec, micro_batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, micro_batch, spec.in_features, generator=gen)
    return x, torch.randint(0, 10, (2, micro_batch), generator=gen)


def _processor(
    comm: Communicator,
    model: nn.Module,
    perturbation: Distribution = "rademacher",
    peer: Peer | None = None,
) -> PairProcessor:
    return PairProcessor(
        model,
        comm,
        role_rank=comm.rank,
        num_processors=comm.world_size,
        job_seed=0,
        epsilon=1e-3,
        schedule=Schedule(1e-4, 1_000_000),
        perturbation=perturbation,
        peer=peer,
    )


def _timing(comm: Communicator, spec: SpeedSpec, peer: Peer | None) -> dict[str, float]:
    model = _mlp(spec, spec.time_hidden)
    proc = _processor(comm, model, spec.perturbation, peer)
    kinds: list[Distribution] = ["gaussian"]
    if spec.perturbation != "gaussian":
        kinds.append(spec.perturbation)
    mezo = {
        kind: MezoStep(
            copy.deepcopy(model), epsilon=1e-3, lr=1e-4, task="classification", distribution=kind
        )
        for kind in kinds
    }
    data_parallel = DataParallelMezo(
        copy.deepcopy(model),
        comm,
        epsilon=1e-3,
        lr=1e-4,
        task="classification",
        distribution=spec.perturbation,
        peer=peer,
    )
    x, y = _inputs(spec, spec.time_micro_batch)
    ours, dp, waiting = Times(), Times(), Times()
    theirs = {kind: Times() for kind in kinds}
    for step in range(spec.warmup_steps + spec.timed_steps):
        timed = step >= spec.warmup_steps
        seed = direction_seed(0, step, 0)
        for kind in kinds:
            _alone_on_rank_0(comm, mezo[kind], seed, x, y, theirs[kind], waiting, timed)
        comm.barrier()
        with _clock(dp, timed):
            data_parallel.step(seed, x, y)
        comm.barrier()
        with _clock(ours, timed):
            proc.step(step, x, y)
    steps = spec.warmup_steps + spec.timed_steps
    result = {
        "step_time_s": ours.median(),
        "step_cpu_time_s": ours.cpu_median(),
        "z_generations_per_step": proc.source.generations / steps,
        "data_parallel_mezo_step_time_s": dp.median(),
        "data_parallel_mezo_cpu_time_s": dp.cpu_median(),
        "data_parallel_mezo_z_generations_per_step": data_parallel.source.generations / steps,
    }
    if comm.rank == 0:
        result["mezo_z_generations_per_step"] = mezo["gaussian"].source.generations / steps
        for kind in kinds:
            result[f"mezo_{kind}_1_thread_step_time_s"] = theirs[kind].median()
            result[f"mezo_{kind}_cpu_time_s"] = theirs[kind].cpu_median()
        result["mezo_single_process_cpu_time_s"] = result["mezo_gaussian_cpu_time_s"]
    else:
        result["waiting_rank_cpu_share"] = waiting.cpu_share()
    comm.barrier()
    # two threads last: idle OpenMP workers keep spinning for a while after a parallel region
    if spec.baseline_threads > 1:
        threaded = {kind: Times() for kind in kinds}
        wait_threaded = Times()
        if comm.rank == 0:
            torch.set_num_threads(spec.baseline_threads)
        for step in range(steps, steps + spec.warmup_steps + spec.timed_steps):
            timed = step >= steps + spec.warmup_steps
            seed = direction_seed(0, step, 0)
            for kind in kinds:
                _alone_on_rank_0(comm, mezo[kind], seed, x, y, threaded[kind], wait_threaded, timed)
        torch.set_num_threads(1)
        if comm.rank == 0:
            for kind in kinds:
                key = f"mezo_{kind}_{spec.baseline_threads}_thread_step_time_s"
                result[key] = threaded[kind].median()
        else:
            result["waiting_rank_cpu_share_threaded"] = wait_threaded.cpu_share()
    if comm.rank == 0:
        # each baseline gets whichever thread count serves it best on this machine
        best = {
            kind: min(
                v
                for k, v in result.items()
                if k.startswith(f"mezo_{kind}_") and k.endswith("_thread_step_time_s")
            )
            for kind in kinds
        }
        result["mezo_single_process_step_time_s"] = best["gaussian"]
        result["mezo_same_z_step_time_s"] = best[spec.perturbation]
    comm.barrier()
    result["parallel_capacity"] = _parallel_capacity(comm)
    return result


class Times:
    """Wall and CPU seconds of repeated timed sections."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def median(self) -> float:
        return statistics.median(self.wall)

    def cpu_median(self) -> float:
        return statistics.median(self.cpu)

    def cpu_share(self) -> float:
        """CPU seconds over wall seconds, all sections together."""
        return sum(self.cpu) / sum(self.wall)


@contextmanager
def _clock(times: Times, timed: bool) -> Iterator[None]:
    began, began_cpu = time.perf_counter(), time.process_time()
    yield
    if timed:
        times.wall.append(time.perf_counter() - began)
        times.cpu.append(time.process_time() - began_cpu)


def _alone_on_rank_0(
    comm: Communicator,
    baseline: MezoStep,
    seed: int,
    x: torch.Tensor,
    y: torch.Tensor,
    times: Times,
    waiting: Times,
    timed: bool,
) -> None:
    """A MeZO step on rank 0 while rank 1 waits at a barrier, whose CPU use is recorded: a
    waiting rank that spun would take a core from the baseline."""
    comm.barrier()
    if comm.rank == 0:
        with _clock(times, timed):
            baseline.step(seed, x, y)
        comm.barrier()
    else:
        with _clock(waiting, timed):
            comm.barrier()


def _parallel_capacity(comm: Communicator, elements: int = 1 << 22, rounds: int = 6) -> float:
    """How many cores two busy processes really get now: 2.0 on an idle two-core machine.

    Rank 0 alone generates ``rounds`` blocks of normals, then both ranks generate half as many
    at once; the ratio of the two wall times is the parallelism the machine offers.
    """
    gen = torch.Generator().manual_seed(comm.rank)

    def work(blocks: int) -> float:
        began = time.perf_counter()
        for _ in range(blocks):
            torch.randn(elements, generator=gen)
        return time.perf_counter() - began

    comm.barrier()
    alone = work(rounds) if comm.rank == 0 else 0.0
    comm.barrier()
    comm.barrier()
    began = time.perf_counter()
    work(rounds // 2)
    comm.barrier()
    together = time.perf_counter() - began
    return alone / together if comm.rank == 0 else float("nan")


def _memory(comm: Communicator, spec: SpeedSpec) -> dict[str, float]:
    model = _mlp(spec, spec.memory_hidden)
    proc = _processor(comm, model, spec.perturbation)
    x, y = _inputs(spec, spec.memory_micro_batch)
    params = list(model.parameters())
    proc.step(0, x, y)
    result: dict[str, float] = {}
    if comm.rank == 0:
        resident = tensor_bytes([*params, x, y])
        result["peak_step_memory_bytes"] = peak_step_bytes(
            lambda: proc.step(1, x, y), resident=resident, device=x.device
        )
    else:
        proc.step(1, x, y)
    comm.barrier()
    if comm.rank == 0:
        result.update(_backprop_memory(copy.deepcopy(model), x, y))
        result["weight_bytes"] = tensor_bytes(params)
    return result


def _backprop_memory(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    flat_x, flat_y = x.flatten(0, 1), y.flatten(0, 1)

    def step() -> None:
        optimizer.zero_grad(set_to_none=False)
        F.cross_entropy(model(flat_x), flat_y).backward()
        optimizer.step()

    step()
    params = list(model.parameters())
    resident = tensor_bytes([*params, *(p.grad for p in params), x, y])
    peak = peak_step_bytes(step, resident=resident, device=x.device)
    return {"backprop_peak_step_memory_bytes": peak}


def speed_world(comm: Communicator, spec: SpeedSpec) -> dict[str, Any]:
    """Both parts on two ranks joined, as a two-processor job's are, by a direct link that
    carries ``zo_pair``'s losses and data-parallel MeZO's scalar alike."""
    torch.set_num_threads(1)
    peer, fell_back = open_link(comm, comm.rank, 1 - comm.rank, "direct")
    if fell_back is not None:
        raise RuntimeError(f"the direct link between the two ranks failed: {fell_back}")
    try:
        return {**_timing(comm, spec, peer), **_memory(comm, spec)}
    finally:
        peer.close()
