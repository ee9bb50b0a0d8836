"""The pair protocol on a real world, wired as the platform wires it, against a single-process
reference."""

from __future__ import annotations

from typing import Any, Literal

import pytest
import torch
from torch.func import functional_call

from tessera_ml.algorithms.zo_pair.model import per_input_loss
from tessera_ml.algorithms.zo_pair.perturb import ZSource, unique_parameters
from tests.ml.zo_pair.world import EPS, LR, STEPS, make_processor, pair_inputs


def _reference(n: int, directions: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Plain MeZO arithmetic with whole-model z materialised, one process."""
    proc = make_processor(None, 0, n, directions)
    model = proc.model
    source = ZSource(unique_parameters(model), proc.source.distribution)
    names = [name for name, _ in model.named_parameters()]
    all_grads = []
    for step in range(STEPS):
        grads, moves = [], []
        for pair in range(n // 2):
            seed = proc.seed_of_pair(step, pair)
            z = [source.draw(seed, i) for i in range(len(names))]
            x, y = pair_inputs(step, pair)
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
                    p.sub_(LR * moves[0][0][i] * float(torch.stack(grads).mean()))
                else:
                    for z_pair, g_pair in moves:
                        p.sub_(LR * z_pair[i] * g_pair / len(moves))
    return [p.detach() for p in model.parameters()], all_grads


N = 4


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
