"""Real local worlds for tests and benchmarks: ``run_world`` runs a function on every rank of
a world of local processes; ``run_algorithm`` runs a registered algorithm on one as the
platform would."""

from tessera_ml.worlds.jobs import (
    RankOutcome,
    entry_point,
    hosts_by_party,
    plan_job,
    rank_context,
    run_algorithm,
    sample_plaintext,
)
from tessera_ml.worlds.processes import PartyWorld, WorldError, free_port, party_world, run_world
from tessera_ml.worlds.several import WorldJob, run_job, run_jobs

__all__ = [
    "PartyWorld",
    "RankOutcome",
    "WorldError",
    "WorldJob",
    "entry_point",
    "free_port",
    "hosts_by_party",
    "party_world",
    "plan_job",
    "rank_context",
    "run_algorithm",
    "run_job",
    "run_jobs",
    "run_world",
    "sample_plaintext",
]
