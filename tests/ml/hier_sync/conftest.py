"""One real 4-rank world for every multi-process test of hier_sync.

Starting a world costs far more than the work these tests do, so the world runs the ring
collective checks and then every platform job (two nodes of two devices, and ddp on the same
four ranks) once per session; the tests read what it returned. Every job puts alice on ranks 0
and 1 and bob on ranks 2 and 3, and the world is wired as the platform wires such a job: each
party's ranks on their own gloo world, TLS between the parties.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tessera_ml.bench.hier_sync.jobs import run_named
from tessera_ml.comm.base import Communicator
from tessera_ml.errors import CodedError
from tessera_ml.worlds import RankOutcome, WorldJob, run_job, run_world
from tests.ml.hier_sync.test_harness_hooks import run_hooks
from tests.ml.hier_sync.test_ring import run_collectives
from tests.ml.hier_sync.test_shared_node import run_shared
from tests.ml.worlds import world_parties

STEPS = 50
NODES = [
    {"party": "alice", "role": "node", "processes": 2},
    {"party": "bob", "role": "node", "processes": 2},
]
TRAINERS = [
    {"party": "alice", "role": "trainer", "processes": 2},
    {"party": "bob", "role": "trainer", "processes": 2},
]
COMMON = {"steps": STEPS, "batch_size": 16, "seed": 3, "model": {"kind": "mlp", "hidden": [48]}}
SGD = {**COMMON, "optimizer": "sgd", "lr": 0.05, "momentum": 0.9}
ADAM = {**COMMON, "optimizer": "adam", "lr": 0.002}
UNEVEN = {"slicing": "memory", "capacities": [0.7, 0.3]}
SMALL_BUCKETS = {"bucket_bytes": 1024}
"""Two buckets for the MLP below: the last layer, then the first."""
INT8 = {"inter_node_compression": "int8", "compression_block": 64}
RINGS = {"intra_node_transport": "ring"}
# MLP 64 -> 48 -> 10: G bytes of parameters; SGD with momentum keeps G bytes of state. Every
# device holds the parameters and a gradient buffer (2 G); device 1's budget leaves room for
# 0.3 of the optimizer state, less than its equal share.
G = (64 * 48 + 48 + 48 * 10 + 10) * 4
BUDGETS = [2 * G + G, 2 * G + int(0.3 * G)]
BUDGETED = [{**n, "options": {"memory_bytes": BUDGETS}} for n in NODES]


def jobs(root: Path) -> list[WorldJob]:
    def job(
        name: str, algorithm: str, config: dict[str, Any], resume: str | None = None
    ) -> WorldJob:
        assignments = TRAINERS if algorithm == "ddp" else NODES
        resume_from = str(root / resume) if resume else None
        return WorldJob(algorithm, assignments, config, name, str(root / name), resume_from)

    ddp_only = {"checkpoint_interval": STEPS, "eval_interval": 0}
    return [
        WorldJob("hier_sync", BUDGETED, {**SGD, "slicing": "memory"}, "memory_budget"),
        job("ddp_sgd", "ddp", {**SGD, **ddp_only}),
        job("equal_sgd", "hier_sync", {**SGD, **SMALL_BUCKETS, "checkpoint_interval": 25}),
        job("uneven_sgd", "hier_sync", {**SGD, **UNEVEN, "checkpoint_interval": STEPS}),
        job("uneven_sgd_rings", "hier_sync", {**SGD, **UNEVEN, **RINGS}),
        job(
            "equal_sgd_rings",
            "hier_sync",
            {**SGD, **SMALL_BUCKETS, **RINGS, "checkpoint_interval": STEPS},
        ),
        job(
            "resumed_sgd",
            "hier_sync",
            {**SGD, **SMALL_BUCKETS, "checkpoint_interval": 25},
            resume="equal_sgd/step-000000025",
        ),
        job("int8_sgd", "hier_sync", {**SGD, **SMALL_BUCKETS, **INT8, "checkpoint_interval": 25}),
        job(
            "int8_resumed",
            "hier_sync",
            {**SGD, **SMALL_BUCKETS, **INT8, "checkpoint_interval": 25},
            resume="int8_sgd/step-000000025",
        ),
        job("ddp_adam", "ddp", {**ADAM, **ddp_only}),
        job(
            "uneven_adam",
            "hier_sync",
            {**ADAM, **UNEVEN, **SMALL_BUCKETS, "overlap": False, "checkpoint_interval": STEPS},
        ),
        WorldJob(
            "hier_sync",
            NODES,
            {**SGD, "checkpoint_interval": 100},
            "stopped",
            str(root / "stopped"),
            stop=(1, 10),
        ),
    ]


def refused(comm: Communicator, job: WorldJob) -> tuple[str, str] | None:
    """The coded error every rank refuses ``job`` with, or None if it ran."""
    try:
        run_job(comm, job)
    except CodedError as exc:
        return exc.code, exc.reason
    finally:
        comm.barrier()
    return None


def _world_main(comm: Communicator, job_list: list[WorldJob], shared: str) -> dict[str, Any]:
    torch.set_num_threads(1)
    equal = WorldJob("hier_sync", BUDGETED, {**SGD, "slicing": "equal"}, "memory_equal")
    return {
        "ring": run_collectives(comm),
        "shared": run_shared(comm, shared),
        "hooks": run_hooks(comm),
        "jobs": run_named(comm, job_list),
        "refused": refused(comm, equal),
    }


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("hier_sync")
    job_list = jobs(root)
    parties = world_parties((j.algorithm, j.assignments, j.config) for j in job_list)
    shared = str(tmp_path_factory.mktemp("shared_node"))
    per_rank: list[dict[str, Any]] = run_world(
        _world_main, 4, job_list, shared, timeout_s=400, parties=parties
    )
    outcomes: dict[str, RankOutcome] = {
        f"{name}@{rank}": outcome
        for rank, out in enumerate(per_rank)
        for name, outcome in out["jobs"].items()
    }
    return {
        "root": root,
        "ring": [out["ring"] for out in per_rank],
        "shared": [out["shared"] for out in per_rank],
        "hooks": [out["hooks"] for out in per_rank],
        "jobs": outcomes,
        "refused": [out["refused"] for out in per_rank],
    }
