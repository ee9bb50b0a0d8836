"""Each golden job, rerun on a real local world, reproduces its stored loss curve.

Every point must lie within the tolerance stated here (and in the file):
``|loss - golden| <= atol + rtol * |golden|``. A run with the learning rate 10 % higher must
not, which shows the tolerance is tight enough to notice a change of the method.
"""

from __future__ import annotations

import math

import pytest

from tests.ml.golden.curves import (
    JOBS,
    Curve,
    Tolerance,
    load,
    problems,
    run_curve,
    stored_curve,
)

TOLERANCES: dict[str, tuple[float, float]] = {
    # (rtol, atol). The four floating-point jobs repeat bit for bit; mpc_mixed draws its
    # secret shares from os.urandom, so its fixed-point rounding differs run to run.
    "ddp": (1e-4, 1e-6),
    "split_nn": (1e-4, 1e-6),
    "hier_sync": (1e-4, 1e-6),
    "zo_pair": (1e-4, 1e-6),
    "mpc_mixed": (2e-2, 1e-4),
}
LR_FACTOR = 1.1
NAMES = list(JOBS)


def _tolerance(name: str) -> Tolerance:
    rtol, atol = TOLERANCES[name]
    return Tolerance(rtol=rtol, atol=atol)


def _golden(name: str) -> Curve:
    return stored_curve(load(JOBS[name]))


def test_every_algorithm_has_a_golden_job_and_a_tolerance() -> None:
    assert set(NAMES) == {"ddp", "split_nn", "hier_sync", "zo_pair", "mpc_mixed"}
    assert set(TOLERANCES) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_file_states_the_job_the_tolerance_and_a_curve(name: str) -> None:
    job, doc = JOBS[name], load(JOBS[name])
    assert doc["algorithm"] == name
    assert doc["assignments"] == job.assignments
    assert doc["config"] == job.config
    assert doc["regenerate"] == f".venv/bin/python -m tests.ml.golden {name}"
    assert doc["reported_by"] == {"rank": job.loss_rank, "role": job.loss_role, "metric": "loss"}
    rtol, atol = TOLERANCES[name]
    assert (doc["tolerance"]["rtol"], doc["tolerance"]["atol"]) == (rtol, atol)
    assert (job.tolerance.rtol, job.tolerance.atol) == (rtol, atol)
    curve = _golden(name)
    assert 10 <= len(curve) <= 30
    steps = [step for step, _ in curve]
    assert steps == sorted(set(steps))
    assert all(math.isfinite(loss) for _, loss in curve)


@pytest.mark.parametrize("name", NAMES)
def test_rerun_matches_the_golden_curve(name: str) -> None:
    found = problems(_golden(name), run_curve(JOBS[name]), _tolerance(name))
    assert not found, f"{name} left its golden curve:\n" + "\n".join(found)


@pytest.mark.parametrize("name", NAMES)
def test_learning_rate_changed_by_10_percent_leaves_the_tolerance(name: str) -> None:
    golden = _golden(name)
    perturbed = run_curve(JOBS[name].with_lr_scaled(LR_FACTOR))
    assert [s for s, _ in perturbed] == [s for s, _ in golden]
    assert problems(golden, perturbed, _tolerance(name)), f"{name}: lr x{LR_FACTOR} went unseen"


TOL = Tolerance(rtol=1e-3, atol=1e-6)
CURVE: Curve = [(1, 2.0), (2, 1.5), (3, 1.0)]


def test_identical_and_nearby_curves_match() -> None:
    assert problems(CURVE, list(CURVE), TOL) == []
    near = [(s, v * (1 + 0.9e-3)) for s, v in CURVE]
    assert problems(CURVE, near, TOL) == []


def test_one_point_beyond_the_tolerance_fails() -> None:
    for i in range(len(CURVE)):
        off = [(s, v * (1 + 1.1e-3) if j == i else v) for j, (s, v) in enumerate(CURVE)]
        found = problems(CURVE, off, TOL)
        assert len(found) == 1 and found[0].startswith(f"step {CURVE[i][0]}:")


def test_empty_curves_fail() -> None:
    assert problems([], CURVE, TOL) == ["the golden curve is empty"]
    assert problems(CURVE, [], TOL) == ["the run reported no loss"]
    assert problems([], [], TOL)


@pytest.mark.parametrize(
    "steps",
    [[1, 2], [1, 2, 3, 4], [2, 3, 4], [1, 3, 2], [1, 2, 2], [0, 1, 2]],
    ids=["missing", "extra", "shifted", "reordered", "repeated", "renumbered"],
)
def test_different_step_sets_fail(steps: list[int]) -> None:
    values = [v for _, v in CURVE] + [0.5]
    fresh = list(zip(steps, values, strict=False))
    found = problems(CURVE, fresh, TOL)
    assert len(found) == 1 and found[0].startswith("steps differ")


def test_non_finite_losses_fail() -> None:
    assert problems(CURVE, [(1, 2.0), (2, math.nan), (3, 1.0)], TOL)
    assert problems(CURVE, [(1, 2.0), (2, 1.5), (3, math.inf)], TOL)
