"""The traffic breakdown accounts for every byte and round of a step, each at a model site."""

import pytest

from tessera_ml.algorithms.mpc_mixed.traffic import one_step


@pytest.mark.parametrize("mode", ["mixed", "all64"])
def test_breakdown_adds_up_to_the_links_own_count(mode: str) -> None:
    counting = one_step(mode, hidden=8, batch=8)
    assert sum(counting.bytes.values()) == counting.peer.stats.bytes_sent > 0
    assert sum(counting.rounds.values()) == counting.peer.stats.rounds
    assert all(not site.startswith("?") and " / " in site for site in counting.bytes)
    relu = sum(v for site, v in counting.bytes.items() if site.endswith("/ relu"))
    assert relu > 0
