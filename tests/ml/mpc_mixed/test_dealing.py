"""The dealer-cost tool times the bundle a dealer rank makes for one recorded training step."""

from tessera_ml.algorithms.mpc_mixed.request import Kind
from tessera_ml.bench.mpc_mixed.dealing import dealer_cost, schedule
from tessera_ml.bench.mpc_mixed.traffic import one_step


def test_the_schedule_is_the_steps_items_and_the_bundle_what_a_dealer_sends_for_them() -> None:
    reqs = schedule("mixed", "tree", "local", batch=8, hidden=8)
    material = one_step("mixed", 8, 8, "tree", truncation="local").material
    assert material is not None
    assert reqs == material.requests and len(reqs) > 10
    assert {Kind.COMPARE, Kind.WIDE_MUL, Kind.WIDE_MATMUL} <= {req.kind for req in reqs}
    cost = dealer_cost(reqs, runs=3)
    assert cost.items == len(reqs)
    assert cost.bundle_bytes == material.sent > 0
    assert set(cost.kinds_s) == {req.kind.name for req in reqs}
    assert cost.bundle_s > 0 and cost.draws_s > 0


def test_local_truncation_leaves_the_dealer_fewer_truncation_items() -> None:
    masked = schedule("all64", "tree", "masked", batch=8, hidden=8)
    local = schedule("all64", "tree", "local", batch=8, hidden=8)
    truncations = [sum(req.kind == Kind.TRUNC for req in reqs) for reqs in (masked, local)]
    assert truncations[0] > truncations[1] > 0  # rsqrt's and exp's large values stay masked
    assert {req.kind for req in local} <= {req.kind for req in masked}
