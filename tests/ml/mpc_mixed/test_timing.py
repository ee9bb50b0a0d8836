"""The timing tool runs the real protocol over the direct link and splits a step's CPU time."""

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.bench.mpc_mixed.timing import EXCHANGE, MODES, ReplayProvider, time_modes
from tessera_ml.bench.mpc_mixed.traffic import one_step


def test_replayed_material_recombines_across_the_two_parties() -> None:
    req = Request(Kind.MUL, 32, (3, 4), (3, 4))
    (a0, b0, c0), (a1, b1, c1) = (ReplayProvider(p, seed=7).get(req) for p in (0, 1))
    assert torch.equal((a0 + a1) * (b0 + b1), c0 + c1)
    assert not torch.equal(a0, a0 + a1)  # party 0's share is not the value itself


@pytest.mark.parametrize(
    ("comparisons", "truncations"),
    [
        ({"mixed": "tree", "all64": "tree"}, {"mixed": "masked", "all64": "local"}),
        ({"mixed": "tree", "all64": "fan_in"}, {"mixed": "local", "all64": "local"}),
    ],
    ids=["defaults", "mixed-local-tree-against-all64-local-fan-in"],
)
def test_a_timed_step_takes_the_protocols_rounds_and_splits_its_cpu_time(
    comparisons: dict[str, str], truncations: dict[str, str]
) -> None:
    timings = time_modes(
        steps=2,
        batch=16,
        hidden=8,
        comparison=comparisons["mixed"],
        all64_truncation=truncations["all64"],
        mixed_truncation=truncations["mixed"],
        all64_comparison=comparisons["all64"],
    )
    assert set(timings) == set(MODES)
    for mode in MODES:
        t = timings[mode]
        # one exchange per round of the same step run in process, in the same configuration
        same = one_step(
            mode, hidden=8, batch=16, comparison=comparisons[mode], truncation=truncations[mode]
        )
        assert t.calls[EXCHANGE] == sum(same.rounds.values())
        assert t.step_wall_s > 0 and t.step_cpu_s > 0
        assert sum(t.cpu_s.values()) <= t.step_cpu_s * 1.05
        assert t.calls["nonneg_bit"] >= 2
    assert timings["mixed"].calls["wide_mul"] > 0
    assert "wide_mul" not in timings["all64"].calls


def test_without_retrying_a_party_sleeps_more_often() -> None:
    at_once = time_modes(steps=2, batch=16, hidden=8, spin_s=0.0)
    retrying = time_modes(steps=2, batch=16, hidden=8, spin_s=0.5)
    for mode in MODES:
        # half a second is longer than any round's wait here: no sleeps at all
        assert retrying[mode].sleeps == 0
        assert at_once[mode].sleeps > 0
