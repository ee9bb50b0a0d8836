"""Step time against single-process MeZO, and peak step memory against backprop, on two ranks.

``speed_world`` runs on a real two-rank world. Timing alternates step by step: rank 0 alone runs
a MeZO step over the same two inputs (with one thread, then with two; rank 1 waits at a
barrier), then both ranks run one ``zo_pair`` step. Medians over many alternations keep a
drifting machine load from favouring either side.
"""

from __future__ import annotations

import copy
import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from tessera_ml.algorithms.zo_pair.memory import peak_step_bytes, tensor_bytes
from tessera_ml.algorithms.zo_pair.mezo import MezoStep
from tessera_ml.algorithms.zo_pair.protocol import PairProcessor, Schedule
from tessera_ml.algorithms.zo_pair.seeds import direction_seed
from tessera_ml.comm.base import Communicator
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
    baseline_threads: tuple[int, ...] = (1, 2)


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


def _processor(comm: Communicator, model: nn.Module) -> PairProcessor:
    return PairProcessor(
        model,
        comm,
        role_rank=comm.rank,
        num_processors=comm.world_size,
        job_seed=0,
        epsilon=1e-3,
        schedule=Schedule(1e-4, 1_000_000),
    )


def _timing(comm: Communicator, spec: SpeedSpec) -> dict[str, float]:
    model = _mlp(spec, spec.time_hidden)
    proc = _processor(comm, model)
    mezo = MezoStep(copy.deepcopy(model), epsilon=1e-3, lr=1e-4, task="classification")
    x, y = _inputs(spec, spec.time_micro_batch)
    ours: list[float] = []
    theirs: dict[int, list[float]] = {t: [] for t in spec.baseline_threads}
    for step in range(spec.warmup_steps + spec.timed_steps):
        timed = step >= spec.warmup_steps
        for threads, times in theirs.items():
            comm.barrier()
            if comm.rank == 0:
                torch.set_num_threads(threads)
                began = time.perf_counter()
                mezo.step(direction_seed(0, step, 0), x, y)
                elapsed = time.perf_counter() - began
                torch.set_num_threads(1)
                if timed:
                    times.append(elapsed)
        comm.barrier()
        began = time.perf_counter()
        proc.step(step, x, y)
        if timed:
            ours.append(time.perf_counter() - began)
    steps = spec.warmup_steps + spec.timed_steps
    result = {
        "step_time_s": statistics.median(ours),
        "z_generations_per_step": proc.source.generations / steps,
    }
    if comm.rank == 0:
        medians = {t: statistics.median(v) for t, v in theirs.items()}
        for threads, median in medians.items():
            result[f"mezo_{threads}_thread_step_time_s"] = median
        # the baseline gets whichever thread count serves it best on this machine
        result["mezo_single_process_step_time_s"] = min(medians.values())
        result["mezo_z_generations_per_step"] = mezo.source.generations / steps / len(theirs)
    return result


def _memory(comm: Communicator, spec: SpeedSpec) -> dict[str, float]:
    model = _mlp(spec, spec.memory_hidden)
    proc = _processor(comm, model)
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
    torch.set_num_threads(1)
    return {**_timing(comm, spec), **_memory(comm, spec)}
