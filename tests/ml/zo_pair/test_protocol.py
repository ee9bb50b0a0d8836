"""The pair protocol on a real gloo world against a single-process reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
import torch
from torch.func import functional_call

from tessera_ml.algorithms.zo_pair.model import per_input_loss
from tessera_ml.algorithms.zo_pair.perturb import ZSource, unique_parameters
from tessera_ml.algorithms.zo_pair.protocol import PairProcessor, Schedule
from tessera_ml.algorithms.zo_pair.train import run
from tessera_ml.comm.base import Communicator
from tessera_ml.context import RankContext
from tessera_ml.models.zoo import build_model
from tessera_ml.registry import get_spec
from tessera_ml.spec import Assignment
from tessera_ml.testing import run_world

EPS, LR, STEPS, MB = 1e-2, 0.05, 3, 4


def _inputs(step: int, pair: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1000 * step + pair)
    return torch.randn(2, MB, 5, generator=gen), torch.randint(0, 3, (2, MB), generator=gen)


def _model() -> torch.nn.Module:
    torch.manual_seed(1)
    return build_model({"kind": "mlp", "hidden": [6], "in_features": 5, "out_features": 3})


def _processor(comm: Communicator | None, role_rank: int, n: int, directions: str) -> PairProcessor:
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


def _rank(comm: Communicator, folder: str) -> dict[str, dict[str, Any]]:
    torch.set_num_threads(1)
    out = {d: _steps(comm, d) for d in ("shared", "per_pair")}
    out["jobs"] = _jobs(comm, Path(folder))
    return out


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


def _jobs(comm: Communicator, folder: Path) -> dict[str, Any]:
    """Whole jobs through the entry point: uninterrupted, resumed at step 10, fine-tuned."""
    spec = get_spec("zo_pair")
    assert spec is not None
    assignments = [Assignment(party="a", role="processor", processes=comm.world_size)]

    def job(config: dict[str, Any], name: str, resume: Path | None = None) -> dict[str, Any]:
        cfg = spec.parse_config(config)
        plan = spec.make_plan(assignments, cfg)
        ctx = RankContext(
            rank=comm.rank,
            world_size=comm.world_size,
            slot=plan[comm.rank],
            plan=plan,
            config=cfg,
            comm=comm,
            checkpoint_dir=folder / name,
            resume_from=resume,
        )
        result: dict[str, Any] = run(ctx)
        comm.barrier()
        return result

    full = job(JOB, "full")
    resumed = job(JOB, "resumed", folder / "full" / "step-000000010")
    tuned = job(
        {**JOB, "steps": 3, "init_checkpoint": str(folder / "full" / "step-000000020")}, "tuned"
    )
    return {"full": full, "resumed": resumed, "tuned": tuned}


def _steps(comm: Communicator, directions: str) -> dict[str, Any]:
    comm.stats.reset()
    proc = _processor(comm, comm.rank, comm.world_size, directions)
    grads = []
    for step in range(STEPS):
        grads.append(proc.step(step, *_inputs(step, proc.pair)).grad_scalars.numpy())
    # numpy, not tensors: tensors would travel through shared memory that dies with the rank
    return {
        "params": [p.detach().numpy().copy() for p in proc.model.parameters()],
        "grads": grads,
        "sent": comm.stats.sent,
    }


def _reference(n: int, directions: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Plain MeZO arithmetic with whole-model z materialised, one process."""
    proc = _processor(None, 0, n, directions)
    model, source = proc.model, ZSource(unique_parameters(proc.model))
    names = [name for name, _ in model.named_parameters()]
    all_grads = []
    for step in range(STEPS):
        grads, moves = [], []
        for pair in range(n // 2):
            seed = proc.seed_of_pair(step, pair)
            z = [source.draw(seed, i) for i in range(len(names))]
            x, y = _inputs(step, pair)
            side = []
            for sign in (1.0, -1.0):
                weights = {
                    k: p.detach() + sign * EPS * zi
                    for k, p, zi in zip(names, model.parameters(), z, strict=True)
                }
                out = functional_call(model, weights, (x.view(-1, 5),))
                side.append(per_input_loss(out, y.view(-1), "classification", 2).double())
            g = (side[0] - side[1]) / (2 * EPS)
            grads.append(g)
            moves.append((z, float(g.mean())))
        all_grads.append(torch.stack(grads))
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                if directions == "shared":
                    p -= LR * moves[0][0][i] * float(torch.stack(grads).mean())
                else:
                    for z_pair, g_pair in moves:
                        p -= LR * z_pair[i] * g_pair / len(moves)
    return [p.detach() for p in model.parameters()], all_grads


N = 4


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, dict[str, Any]]]:
    return run_world(_rank, N, str(tmp_path_factory.mktemp("zo_pair_jobs")))


@pytest.mark.parametrize("directions", ["shared", "per_pair"])
def test_distributed_steps_match_the_reference_and_copies_are_identical(
    world: list[dict[str, dict[str, Any]]], directions: Literal["shared", "per_pair"]
) -> None:
    n = N
    results = [r[directions] for r in world]
    ref_params, ref_grads = _reference(n, directions)
    for r in results[1:]:
        for a, b in zip(r["params"], results[0]["params"], strict=True):
            assert a.tobytes() == b.tobytes()
    for got, want in zip(results[0]["grads"], ref_grads, strict=True):
        assert torch.allclose(torch.from_numpy(got), want, rtol=1e-3, atol=1e-3)
    for got, want in zip(results[0]["params"], ref_params, strict=True):
        assert torch.allclose(torch.from_numpy(got), want, rtol=0, atol=1e-5)
    # only the two float32 losses of each processor cross the network, gathered by n - 1 peers
    assert all(r["sent"] == STEPS * (n - 1) * 2 * 4 for r in results)


def test_a_resumed_job_ends_bit_identical_to_the_uninterrupted_one(
    world: list[dict[str, dict[str, Any]]],
) -> None:
    full = {r["jobs"]["full"]["checksum"] for r in world}
    assert len(full) == 1
    assert {r["jobs"]["resumed"]["checksum"] for r in world} == full
    assert {r["jobs"]["resumed"]["steps"] for r in world} == {20}
    assert {r["jobs"]["full"]["initial_checksum"] for r in world} != full


def test_fine_tuning_starts_from_the_checkpoint_a_job_wrote(
    world: list[dict[str, dict[str, Any]]],
) -> None:
    full = world[0]["jobs"]["full"]["checksum"]
    assert {r["jobs"]["tuned"]["initial_checksum"] for r in world} == {full}
    assert len({r["jobs"]["tuned"]["checksum"] for r in world}) == 1
    assert world[0]["jobs"]["tuned"]["checksum"] != full
