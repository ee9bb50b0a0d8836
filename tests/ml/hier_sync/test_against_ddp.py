"""hier_sync against ddp from the same initialisation and data, as platform jobs on 4 ranks.

Two nodes of two devices; one world runs every job in turn (see ``scenarios``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tessera_ml.bench.hier_sync.jobs import ddp_params, hier_params
from tessera_ml.worlds import RankOutcome
from tests.ml.hier_sync.conftest import BUDGETS, STEPS, G

Runs = tuple[Path, dict[str, RankOutcome]]


@pytest.fixture(scope="module")
def runs(world: dict[str, Any]) -> Runs:
    return world["root"], world["jobs"]


def _final(root: Path, name: str) -> Path:
    return root / name / f"step-{STEPS:09d}"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("hier", "ddp"),
    [("equal_sgd", "ddp_sgd"), ("uneven_sgd", "ddp_sgd"), ("uneven_adam", "ddp_adam")],
)
def test_parameters_match_ddp_after_50_steps(runs: Runs, hier: str, ddp: str) -> None:
    root, _ = runs
    reference = ddp_params(_final(root, ddp))
    for node in ([0, 1], [2, 3]):
        params = hier_params(_final(root, hier), node)
        assert not torch.isnan(params).any()
        assert float((params - reference).abs().max()) <= 1e-6
    initial = ddp_params(_final(root, ddp))
    assert float((initial - hier_params(_final(root, "equal_sgd"), [0, 1])).abs().max()) < 1.0


@pytest.mark.slow
def test_resuming_from_saved_slices_continues_the_same_run(
    runs: Runs,
) -> None:
    root, outcomes = runs
    whole = hier_params(_final(root, "equal_sgd"), [0, 1])
    resumed = hier_params(_final(root, "resumed_sgd"), [2, 3])
    assert torch.equal(whole, resumed)
    assert next(s for s, _ in outcomes["resumed_sgd@0"].series("loss")) == 26


@pytest.mark.slow
def test_state_bytes_and_slices_follow_the_capacities(
    runs: Runs,
) -> None:
    _, outcomes = runs
    for hier, slots in (("uneven_sgd", 1), ("uneven_adam", 2)):
        for rank in range(4):
            result = outcomes[f"{hier}@{rank}"].result
            assert result["capacity_fractions"] == pytest.approx([0.7, 0.3])
            fraction = result["slice_fractions"][rank % 2]
            assert fraction == pytest.approx([0.7, 0.3][rank % 2], abs=0.01)
            grad_bytes = result["numel"] * 4
            optimizer = result["optimizer_state_bytes"]
            assert optimizer == pytest.approx(fraction * slots * grad_bytes, rel=0.01)
            # the reduced slice lives in the full-size gradient buffer: it saves nothing
            assert result["state_bytes"] == grad_bytes + optimizer


@pytest.mark.slow
def test_a_device_below_its_equal_share_trains_with_memory_slices_and_is_refused_equal_ones(
    world: dict[str, Any],
) -> None:
    free = [b - 2 * G for b in BUDGETS]
    for rank in range(4):
        result = world["jobs"][f"memory_budget@{rank}"].result
        assert result["slice_fractions"] == pytest.approx([f / sum(free) for f in free], abs=0.01)
        assert result["optimizer_state_bytes"] <= free[rank % 2]
        losses = [v for _, v in world["jobs"][f"memory_budget@{rank}"].series("loss")]
        assert sum(losses[-5:]) < 0.5 * sum(losses[:5])
        code, reason = world["refused"][rank]
        assert code == "slice_exceeds_memory"
        assert f"device 1 of node 0 has {free[1]} bytes free" in reason
        assert "slicing 'memory'" in reason


@pytest.mark.slow
def test_bytes_per_link_match_the_formulas(runs: Runs) -> None:
    _, outcomes = runs
    for rank in range(4):
        result = outcomes[f"uneven_sgd_rings@{rank}"].result
        grad_bytes = result["numel"] * 4
        fractions = result["slice_fractions"]
        own = fractions[rank % 2] * grad_bytes
        other = fractions[1 - rank % 2] * grad_bytes
        # per step: reduce-scatter G - own, all-gather G - other's; plus one assembly at start
        intra = STEPS * (2 * grad_bytes - own - other) + (grad_bytes - other)
        assert result["bytes_sent.group.intra_node"] == pytest.approx(intra, abs=64)
        # per step: all-reduce of the slice between two nodes, 2(N-1)/N x slice; node 0 also
        # hands its initial slice to node 1
        inter = STEPS * own + (own if rank < 2 else 0)
        assert result["bytes_sent.group.inter_node"] == pytest.approx(inter, abs=64)
        losses = [v for _, v in outcomes[f"uneven_sgd_rings@{rank}"].series("loss")]
        assert len(losses) == STEPS
        assert sum(losses[-5:]) < 0.5 * sum(losses[:5])


@pytest.mark.slow
def test_int8_inter_node_traffic_trains_close_to_full_precision_at_a_quarter_of_the_bytes(
    runs: Runs,
) -> None:
    root, outcomes = runs
    exact = hier_params(_final(root, "equal_sgd"), [0, 1])
    quantised = hier_params(_final(root, "int8_sgd"), [0, 1])
    assert torch.equal(quantised, hier_params(_final(root, "int8_sgd"), [2, 3]))
    gap = float((quantised - exact).abs().max())
    assert 0 < gap < 1e-2
    losses = [v for _, v in outcomes["int8_sgd@0"].series("loss")]
    exact_losses = [v for _, v in outcomes["equal_sgd@0"].series("loss")]
    assert abs(sum(losses[-10:]) - sum(exact_losses[-10:])) < 0.02 * sum(exact_losses[-10:])
    for rank in range(4):
        full = outcomes[f"equal_sgd@{rank}"].series("inter_node_bytes_per_step")[-1][1]
        int8 = outcomes[f"int8_sgd@{rank}"].series("inter_node_bytes_per_step")[-1][1]
        assert 0.25 < int8 / full < 0.35  # a byte per element plus a 4-byte scale per 64


@pytest.mark.slow
def test_resuming_an_int8_run_restores_its_residuals_and_continues_the_same_run(
    runs: Runs,
) -> None:
    root, _ = runs
    whole = hier_params(_final(root, "int8_sgd"), [0, 1])
    resumed = hier_params(_final(root, "int8_resumed"), [2, 3])
    assert torch.equal(whole, resumed)
    saved = torch.load(root / "int8_sgd" / "step-000000025" / "rank-0.pt", weights_only=True)[
        "slice"
    ]
    assert saved["residual"].abs().max() > 0


@pytest.mark.slow
def test_a_node_sharing_memory_trains_bit_for_bit_as_over_the_rings(runs: Runs) -> None:
    root, outcomes = runs
    for node in ([0, 1], [2, 3]):
        shared = hier_params(_final(root, "equal_sgd"), node)
        assert torch.equal(shared, hier_params(_final(root, "equal_sgd_rings"), node))
    for rank in range(4):
        shared_run = outcomes[f"equal_sgd@{rank}"].result
        rings_run = outcomes[f"equal_sgd_rings@{rank}"].result
        assert shared_run["intra_node_transport"] == "shared_memory"
        assert rings_run["intra_node_transport"] == "ring"
        # inside the node only set-up and one-byte barriers cross the links
        shared_bytes = shared_run["bytes_sent.group.intra_node"]
        assert 0 < shared_bytes < 0.01 * rings_run["bytes_sent.group.intra_node"]
