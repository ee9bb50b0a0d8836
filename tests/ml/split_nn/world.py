"""Runs several split_nn jobs in one real world, recording every message each rank sends.

The world is wired as the platform wires a split_nn job (``parties``): every rank is its own
party, so every message crosses a TLS link."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from tessera_ml.comm.base import ByteStats, Communicator, Group, ReduceOp, Work
from tessera_ml.worlds import WorldJob, run_job
from tests.ml.worlds import world_parties


class RecordingCommunicator(Communicator):
    """Delegates to a real communicator and keeps a copy of every tensor this rank sends."""

    def __init__(self, inner: Communicator) -> None:
        self.inner = inner
        self.rank = inner.rank
        self.world_size = inner.world_size
        self.sent: list[tuple[int, torch.Tensor]] = []

    @property
    def stats(self) -> ByteStats:  # type: ignore[override]
        return self.inner.stats

    @property
    def world(self) -> Group:
        return self.inner.world

    def new_group(self, ranks: Sequence[int], name: str) -> Group:
        return self.inner.new_group(ranks, name)

    def send(self, tensor: torch.Tensor, dst: int) -> None:
        self.sent.append((dst, tensor.detach().clone()))
        self.inner.send(tensor, dst)

    def recv(self, tensor: torch.Tensor, src: int) -> None:
        self.inner.recv(tensor, src)

    def isend(self, tensor: torch.Tensor, dst: int) -> Work:
        self.sent.append((dst, tensor.detach().clone()))
        return self.inner.isend(tensor, dst)

    def irecv(self, tensor: torch.Tensor, src: int) -> Work:
        return self.inner.irecv(tensor, src)

    def all_reduce(
        self, tensor: torch.Tensor, op: ReduceOp = "sum", group: Group | None = None
    ) -> None:
        self.sent.append((-1, tensor.detach().clone()))
        self.inner.all_reduce(tensor, op, group)

    def all_gather(self, tensor: torch.Tensor, group: Group | None = None) -> list[torch.Tensor]:
        self.sent.append((-1, tensor.detach().clone()))
        return self.inner.all_gather(tensor, group)

    def broadcast(self, tensor: torch.Tensor, src: int, group: Group | None = None) -> None:
        if self.rank == src:
            self.sent.append((-1, tensor.detach().clone()))
        self.inner.broadcast(tensor, src, group)

    def barrier(self, group: Group | None = None) -> None:
        self.inner.barrier(group)

    def all_gather_data(self, obj: Any, group: Group | None = None) -> list[Any]:
        raise AssertionError("split_nn does not gather data")


@dataclass
class Job:
    assignments: list[dict[str, Any]]
    config: dict[str, Any]
    checkpoint_dir: str | None = None
    resume_from: str | None = None
    stop_on_rank: int | None = None
    """This rank's stop signal is set before the job starts (a cancellation seen by one rank)."""


def parties(jobs: Sequence[Job]) -> list[str]:
    """The party of each rank of a world running ``jobs``: the same in every job's plan."""
    return world_parties(("split_nn", job.assignments, job.config) for job in jobs)


def run_jobs(comm: Communicator, jobs: list[Job]) -> list[dict[str, Any]]:
    """On each rank: every job in turn, each with a fresh recording communicator."""
    out = []
    for job in jobs:
        recorder = RecordingCommunicator(comm)

        stop = None if job.stop_on_rank is None else (job.stop_on_rank, 0)
        world_job = WorldJob(
            "split_nn",
            job.assignments,
            job.config,
            checkpoint_dir=job.checkpoint_dir,
            resume_from=job.resume_from,
            stop=stop,
        )
        comm.stats.reset()
        t0 = time.perf_counter()
        outcome = run_job(comm, world_job, via=recorder)
        result = {
            **outcome.result,
            "job_seconds": time.perf_counter() - t0,
            "sent": [(dst, t.numpy()) for dst, t in recorder.sent],
            "metrics": [(p.step, p.name, p.value) for p in outcome.points],
        }
        out.append(result)
    return out
