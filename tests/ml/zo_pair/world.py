"""One real world of four processors shared by the multi-process tests.

Starting processes dominates the cost of these tests, so a single world runs everything: a few
protocol steps in both direction modes, a 1000-step platform job planned for two parties, and
short jobs that are resumed and fine-tuned from checkpoints. Every job has the same two
parties (three processors on alice, one on bob), and the world is wired as the platform wires
such a job (``PLANS``, see ``conftest.py``): each party on its own gloo world, TLS between them.
Results travel back as plain Python and numpy values (tensors would use shared memory that dies
with the rank).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tessera_ml import worlds
from tessera_ml.algorithms.zo_pair.protocol import PairProcessor, Schedule
from tessera_ml.algorithms.zo_pair.seeds import direction_seed
from tessera_ml.bench.zo_pair.dp_mezo import DataParallelMezo
from tessera_ml.comm.base import Communicator
from tessera_ml.models.zoo import build_model
from tessera_ml.worlds import WorldJob
from tests.ml.worlds import JobPlan

EPS, LR, STEPS, MB = 1e-2, 0.05, 3, 4


def pair_inputs(step: int, pair: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 * step + pair)
    return torch.randn(2, MB, 5, generator=gen), torch.randint(0, 3, (2, MB), generator=gen)


def _model() -> torch.nn.Module:
    torch.manual_seed(1)
    return build_model({"kind": "mlp", "hidden": [6], "in_features": 5, "out_features": 3})


def make_processor(
    comm: Communicator | None, role_rank: int, n: int, directions: str
) -> PairProcessor:
    return PairProcessor(
        _model(),
        comm,  # type: ignore[arg-type]
        role_rank=role_rank,
        num_processors=n,
        job_seed=7,
        epsilon=EPS,
        schedule=Schedule(LR, STEPS),
        directions=directions,  # type: ignore[arg-type]
    )


def zo_world(comm: Communicator, folder: str) -> dict[str, Any]:
    torch.set_num_threads(1)
    out: dict[str, Any] = {d: _steps(comm, d) for d in ("shared", "per_pair")}
    out["data_parallel_mezo"] = _data_parallel_mezo(comm)
    comm.stats.reset()
    out["platform"] = run_job(comm, LONG_ASSIGNMENTS, LONG_JOB)
    out["jobs"] = _jobs(comm, Path(folder))
    return out


LONG_JOB: dict[str, Any] = {
    "seed": 5,
    "steps": 1000,
    "dataset": "sklearn:wine",
    "model": {"kind": "mlp", "hidden": [8]},
    "micro_batch": 4,
    "lr": 0.01,
    "epsilon": 1e-3,
    "eval_every": 500,
    "log_every": 250,
}
LONG_ASSIGNMENTS: list[dict[str, Any]] = [
    {"party": "alice", "role": "processor", "processes": 3},
    {"party": "bob", "role": "processor", "processes": 1},
]


def run_job(
    comm: Communicator,
    assignments: list[dict[str, Any]],
    config: dict[str, Any],
    checkpoint_dir: Path | None = None,
    resume_from: Path | None = None,
) -> dict[str, Any]:
    """One rank of a job, planned and started as the platform does (see ``run_algorithm``)."""
    job = WorldJob(
        "zo_pair",
        assignments,
        config,
        checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None,
        resume_from=str(resume_from) if resume_from else None,
    )
    outcome = worlds.run_job(comm, job)
    comm.barrier()
    return {
        "result": outcome.result,
        "points": [(p.step, p.name, p.value) for p in outcome.points],
        "checkpoints": [c[0] for c in outcome.checkpoints],
    }


JOB: dict[str, Any] = {
    "seed": 2,
    "steps": 20,
    "dataset": "sklearn:wine",
    "model": {"kind": "mlp", "hidden": [4]},
    "micro_batch": 2,
    "lr": 0.01,
    "eval_every": 0,
    "log_every": 5,
    "checkpoint_every": 10,
    "directions": "per_pair",
}


PLANS: list[JobPlan] = [("zo_pair", LONG_ASSIGNMENTS, LONG_JOB), ("zo_pair", LONG_ASSIGNMENTS, JOB)]
"""What plans the world's jobs: every one of them puts the same party on each rank."""


def _jobs(comm: Communicator, folder: Path) -> dict[str, Any]:
    """Whole jobs through the entry point: uninterrupted, resumed at step 10, fine-tuned."""

    def job(config: dict[str, Any], name: str, resume: Path | None = None) -> dict[str, Any]:
        outcome = run_job(comm, LONG_ASSIGNMENTS, config, folder / name, resume)
        result: dict[str, Any] = outcome["result"]
        return result

    full = job(JOB, "full")
    resumed = job(JOB, "resumed", folder / "full" / "step-000000010")
    tuned = job(
        {**JOB, "steps": 3, "init_checkpoint": str(folder / "full" / "step-000000020")}, "tuned"
    )
    return {"full": full, "resumed": resumed, "tuned": tuned}


def all_inputs(step: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``n`` inputs of a step of data-parallel MeZO: every pair's two, in pair order."""
    parts = [pair_inputs(step, pair) for pair in range(n // 2)]
    return torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])


def _data_parallel_mezo(comm: Communicator) -> dict[str, Any]:
    comm.stats.reset()
    baseline = DataParallelMezo(
        _model(), comm, epsilon=EPS, lr=LR, task="classification", distribution="rademacher"
    )
    for step in range(STEPS):
        baseline.step(direction_seed(7, step, 0), *all_inputs(step, comm.world_size))
    return {
        "params": [p.detach().numpy().copy() for p in baseline.model.parameters()],
        "sent": comm.stats.sent,
    }


def _steps(comm: Communicator, directions: str) -> dict[str, Any]:
    comm.stats.reset()
    proc = make_processor(comm, comm.rank, comm.world_size, directions)
    grads = []
    for step in range(STEPS):
        grads.append(proc.step(step, *pair_inputs(step, proc.pair)).grad_scalars.numpy())
    # numpy, not tensors: tensors would travel through shared memory that dies with the rank
    return {
        "params": [p.detach().numpy().copy() for p in proc.model.parameters()],
        "grads": grads,
        "sent": comm.stats.sent,
    }
