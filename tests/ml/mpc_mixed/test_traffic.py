"""The traffic breakdown accounts for every byte and round of a step, each at a model site."""

from collections import Counter

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed.local import engines
from tessera_ml.algorithms.mpc_mixed.request import Kind, Request
from tessera_ml.bench.mpc_mixed.traffic import _CountingMaterial, _CountingOps, one_step


@pytest.mark.parametrize("mode", ["mixed", "all64"])
def test_breakdown_adds_up_to_the_links_own_count(mode: str) -> None:
    counting = one_step(mode, hidden=8, batch=8)
    assert sum(counting.bytes.values()) == counting.peer.stats.bytes_sent > 0
    assert sum(counting.rounds.values()) == counting.peer.stats.rounds
    assert all(not site.startswith("?") and " / " in site for site in counting.bytes)
    relu = sum(v for site, v in counting.bytes.items() if site.endswith("/ relu"))
    assert relu > 0


def test_operation_count_is_party_0s_online_work_only() -> None:
    plain = one_step("mixed", hidden=8, batch=8)
    counted = one_step("mixed", hidden=8, batch=8, ops=True)
    assert not plain.ops
    # the same step, so the same traffic; operations counted where the protocols run
    assert counted.bytes == plain.bytes
    assert sum(counted.ops.values()) > 0
    assert all(" / " in site for site in counted.ops)
    assert any(site.endswith("/ relu") for site in counted.ops)


def test_the_dealers_work_is_not_counted() -> None:
    ops: Counter[str] = Counter()
    e0, _ = engines(0)
    with _CountingOps(ops):
        # the in-process dealer draws this item now: offline work
        e0.provider.get(Request(Kind.MATMUL, 32, (4, 4), (4, 4)))
    assert not ops
    with _CountingOps(ops):
        torch.ones(3) + 1
    assert sum(ops.values()) >= 2


def test_offline_count_is_party_1s_material_and_what_a_dealer_sends_of_it() -> None:
    _, e1 = engines(0)
    material = _CountingMaterial(e1.provider)
    got = [
        material.get(Request(Kind.MATMUL, 32, (4, 4), (4, 4))),
        material.get(Request(Kind.COMPARE, 64, (3,))),
    ]
    assert material.shares == sum(t.numel() * t.element_size() for item in got for t in item)
    # the masks are drawn by party 1 from its own seed: the dealer sends the rest
    assert 0 < material.sent == e1.provider.stats.bytes_received < material.shares
    counting = one_step("mixed", hidden=8, batch=8)
    assert counting.material is not None
    assert 0 < counting.material.sent < counting.material.shares
