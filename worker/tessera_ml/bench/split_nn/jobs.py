"""Several split_nn jobs one after another in one world (``tessera_ml.worlds.run_job``), for the
benchmark: its processes start once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tessera_ml.comm.base import Communicator
from tessera_ml.worlds import WorldJob, run_job


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
    """This rank's result of every job, with what it reported and whether it crossed TLS."""
    out = []
    for job in jobs:
        comm.stats.reset()
        outcome = run_job(comm, WorldJob("split_nn", job.assignments, job.config))
        metrics = [(p.step, p.name, p.value) for p in outcome.points]
        out.append({**outcome.result, "metrics": metrics, "cross_party_tls": cross_party_tls(comm)})
    return out
