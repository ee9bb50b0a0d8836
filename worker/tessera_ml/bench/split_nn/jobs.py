"""Several split_nn jobs one after another in one world (benchmarks: start processes once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tessera_ml.algorithms.split_nn.rank import run
from tessera_ml.comm.base import Communicator
from tessera_ml.report import MemoryReporter
from tessera_ml.worlds import rank_context


@dataclass(frozen=True)
class Job:
    assignments: list[dict[str, Any]]
    config: dict[str, Any]


def cross_party_tls(comm: Communicator) -> bool:
    """Whether this rank reaches every other rank over a TLS link between parties: the
    platform's ``MeshCommunicator`` with TLS, every peer of another party, both links up."""
    from tessera_ml.comm.mesh import MeshCommunicator

    if not isinstance(comm, MeshCommunicator) or comm.tls is None:
        return False
    peers = {r for r in range(comm.world_size) if r != comm.rank}
    foreign = {r for r in peers if not comm.is_local(r)}
    return foreign == peers and set(comm.out) == peers and set(comm.into) == peers


def run_jobs(comm: Communicator, jobs: list[Job]) -> list[dict[str, Any]]:
    """This rank's result of every job, planned exactly as the control plane plans them."""
    out = []
    for job in jobs:
        reporter = MemoryReporter()
        ctx = rank_context(comm, "split_nn", job.assignments, job.config, reporter=reporter)
        comm.stats.reset()
        result = run(ctx)
        result["metrics"] = [(p.step, p.name, p.value) for p in reporter.points]
        result["cross_party_tls"] = cross_party_tls(comm)
        out.append(result)
    return out
