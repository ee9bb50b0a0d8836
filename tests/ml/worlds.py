"""The parties of a test world that runs several platform jobs one after another.

A platform job runs on the mesh (each party's ranks on their own gloo world, TLS between
parties), so a test world that runs jobs spanning parties is wired the same way:
``run_world(fn, n, ..., parties=world_parties(jobs))``. The world is wired once, so every job
it runs must give each rank the same party.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tessera_ml.worlds import plan_job

JobPlan = tuple[str, Sequence[dict[str, Any]], dict[str, Any]]
"""An algorithm's name, a job's assignments and its config, as ``plan_job`` takes them."""


def world_parties(jobs: Iterable[JobPlan]) -> list[str]:
    """The party of each global rank, from the rank plans of ``jobs``, which must all agree."""
    layouts = {
        tuple(slot.party for slot in plan_job(name, list(assignments), config)[2])
        for name, assignments, config in jobs
    }
    if len(layouts) != 1:
        raise ValueError(f"the jobs of one world must plan the same parties, not {layouts}")
    return list(layouts.pop())
