"""``ddp`` and ``hier_sync`` jobs on one world (``tessera_ml.worlds.run_jobs``), their outcomes
by name; ``ddp_params`` and ``hier_params`` read the final parameters back from the jobs'
checkpoints."""

from __future__ import annotations

from pathlib import Path

import torch

from tessera_ml.bench.harness import BenchHarness
from tessera_ml.comm.base import Communicator
from tessera_ml.worlds import RankOutcome, WorldJob, run_jobs


def run_named(comm: Communicator, jobs: list[WorldJob]) -> dict[str, RankOutcome]:
    """``run_jobs`` on this rank, its outcomes by job name."""
    return {job.name: outcome for job, outcome in zip(jobs, run_jobs(comm, jobs), strict=True)}


def paced(speeds: tuple[float, ...]) -> tuple[BenchHarness, ...]:
    """Per rank, a harness that paces its device work to that rank's speed."""
    return tuple(BenchHarness(speed=speed) for speed in speeds)


def ddp_params(folder: Path) -> torch.Tensor:
    """Flat parameters of a ddp checkpoint, last layer first (the layout hier_sync uses)."""
    state = torch.load(folder / "rank-0.pt", weights_only=False)
    tensors = list(state["model"].values())
    return torch.cat([t.reshape(-1) for t in reversed(tensors)])


def hier_params(folder: Path, node_ranks: list[int]) -> torch.Tensor:
    """Flat parameters assembled from the slices the devices of one node saved."""
    slices = [torch.load(folder / f"rank-{r}.pt", weights_only=False)["slice"] for r in node_ranks]
    bounds = slices[0]["bounds"]
    flat = torch.full((bounds[-1][-1],), float("nan"))
    for saved in slices:
        d = saved["number"]
        for b, piece in zip(bounds, saved["pieces"], strict=True):
            flat[b[d] : b[d + 1]] = piece
    return flat
