"""The wrap-risk tool: every locally truncated value counted, step by step."""

from tessera_ml.bench.mpc_mixed.wraps import wrap_risk


def test_several_steps_give_the_mean_risk_and_the_largest_steps() -> None:
    one = wrap_risk("mixed", batch=32, hidden=8)
    three = wrap_risk("mixed", batch=32, hidden=8, steps=3)
    assert (one.steps, three.steps) == (1, 3)
    # every step truncates the same values locally; the weights move, so the risk does too
    assert three.elements == one.elements > 0
    assert 0 < three.expected_per_step <= three.largest_per_step
    # each step's values counted for that step: no step holds most of the three steps' risk
    assert three.largest_per_step < 2 * three.expected_per_step
    assert one.expected_per_step == one.largest_per_step
    assert one.seen == three.seen == 0
