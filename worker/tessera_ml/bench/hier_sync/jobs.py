"""``ddp``, ``hier_sync`` and torch baseline jobs on one world (``world``), their outcomes by
name, and the median over steps of a metric's largest value over ranks (``slowest``; another
pick over ranks: ``per_step_median``); ``ddp_params`` and ``hier_params`` read the final
parameters back from the jobs' checkpoints."""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from tessera_ml.bench.harness import BenchHarness
from tessera_ml.bench.hier_sync.cpu_limit import join_cpu_group
from tessera_ml.bench.hier_sync.rss import MALLOC_ENV, peak_rss_bytes, reset_peak_rss
from tessera_ml.bench.hier_sync.torch_baselines import TorchJob, run_torch
from tessera_ml.comm.base import Communicator
from tessera_ml.safe_load import load_state
from tessera_ml.worlds import RankOutcome, WorldJob, run_job, run_jobs, run_world

PARTY = "cluster"
CPU = torch.device("cpu")
Outcomes = list[dict[str, RankOutcome]]


def run_named(comm: Communicator, jobs: list[WorldJob]) -> dict[str, RankOutcome]:
    """``run_jobs`` on this rank, its outcomes by job name."""
    return {job.name: outcome for job, outcome in zip(jobs, run_jobs(comm, jobs), strict=True)}


def run_measured(
    comm: Communicator, jobs: list[WorldJob | TorchJob], cpu_groups: list[str] | None = None
) -> dict[str, RankOutcome]:
    """Every job in turn on this rank (``hier_sync`` and ``ddp`` as platform jobs, the torch
    baselines beside them), each with its peak resident memory (``peak_rss_bytes`` in the
    outcome's result; ``start_rss_bytes`` what the process held as the job began). With
    ``cpu_groups``, this rank first joins its CPU-limited group."""
    if cpu_groups is not None:
        join_cpu_group(cpu_groups[comm.rank])
    outcomes = {}
    for job in jobs:
        comm.stats.reset()
        gc.collect()  # the last job's model and optimizer, held by reference cycles
        start = reset_peak_rss()
        if isinstance(job, TorchJob):
            harness = BenchHarness()
            outcome = run_torch(comm, job, harness)
        else:
            outcome = run_job(comm, job)
        peak = peak_rss_bytes()
        comm.barrier()
        if isinstance(outcome.result, dict):
            outcome.result["peak_rss_bytes"] = peak
            outcome.result["start_rss_bytes"] = start
        outcomes[job.name] = outcome
    return outcomes


def paced(speeds: tuple[float, ...]) -> tuple[BenchHarness, ...]:
    """Per rank, a harness that paces its device work to that rank's speed."""
    return tuple(BenchHarness(speed=speed) for speed in speeds)


def ddp_params(folder: Path) -> torch.Tensor:
    """Flat parameters of a ddp checkpoint, last layer first (the layout hier_sync uses)."""
    state = load_state(folder / "rank-0.pt", CPU, "a ddp checkpoint")
    tensors = list(state["model"].values())
    return torch.cat([t.reshape(-1) for t in reversed(tensors)])


def hier_params(folder: Path, node_ranks: list[int]) -> torch.Tensor:
    """Flat parameters assembled from the slices the devices of one node saved."""
    slices = [
        load_state(folder / f"rank-{r}.pt", CPU, "a hier_sync checkpoint")["slice"]
        for r in node_ranks
    ]
    bounds = slices[0]["bounds"]
    flat = torch.full((bounds[-1][-1],), float("nan"))
    for saved in slices:
        d = saved["number"]
        for b, piece in zip(bounds, saved["pieces"], strict=True):
            flat[b[d] : b[d + 1]] = piece
    return flat


def world(
    jobs: Sequence[WorldJob | TorchJob],
    ranks: int = 4,
    cpu_groups: list[str] | None = None,
    **kwargs: Any,
) -> Outcomes:
    """Every job in turn on one world of ``ranks`` fresh processes of ``PARTY``, one
    process's outcomes per rank (``cpu_groups``: each rank's CPU-limited group to join;
    ``kwargs`` go to ``run_world``)."""
    outcomes: Outcomes = run_world(
        run_measured,
        ranks,
        list(jobs),
        cpu_groups,
        parties=[PARTY] * ranks,
        env=MALLOC_ENV,
        timeout_s=900,
        **kwargs,
    )
    return outcomes


def slowest(
    outcomes: Outcomes, jobs: Sequence[str], metric: str, warmup: int, ranks: Sequence[int]
) -> float:
    """Per step after ``warmup``, the largest ``metric`` over ``ranks``, pooled over ``jobs``;
    the median of those."""
    return per_step_median(outcomes, jobs, metric, warmup, ranks, max)


def per_step_median(
    outcomes: Outcomes,
    jobs: Sequence[str],
    metric: str,
    warmup: int,
    ranks: Sequence[int],
    pick: Callable[[Iterable[float]], float],
) -> float:
    """Per step after ``warmup``, ``pick`` of ``metric`` over ``ranks``, pooled over ``jobs``;
    the median of those."""
    per_step: list[float] = []
    for job in jobs:
        series = [dict(outcomes[r][job].series(metric)) for r in ranks]
        steps = sorted(s for s in series[0] if s > warmup)
        per_step += [pick(values[s] for values in series) for s in steps]
    return statistics.median(per_step)
