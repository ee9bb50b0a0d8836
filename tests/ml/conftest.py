"""Fixtures for the algorithm library's tests: the network testbed; worlds whose ranks start
without importing torch each time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from tessera_ml.netns import Testbed, unavailable_reason
from tessera_ml.registry import all_specs
from tessera_ml.worlds.processes import start_ranks_from_a_preloaded_server
from tests.conftest import REQUIRE_SERVICES

# these tests start about 80 worlds of some 230 ranks; a fresh interpreter spends about two
# CPU-seconds importing torch and one more on scikit-learn's datasets, so ranks are forked from a
# server that imported them once
start_ranks_from_a_preloaded_server(
    [
        "torch",
        "torch.distributed",
        "sklearn.datasets",
        "tessera_ml.worlds",
        "tessera_ml.comm.world",
        *(spec.entry_point.split(":")[0] for spec in all_specs().values()),
    ]
)

MakeTestbed = Callable[..., Testbed]


@pytest.fixture
def make_testbed() -> Iterator[MakeTestbed]:
    """``make_testbed(hosts=2, rate_mbit=100)``: a started testbed, removed after the test.

    Skips the test, saying why, where network namespaces are not permitted; fails instead under
    ``TESSERA_REQUIRE_SERVICES=1`` (CI), where the testbed is required.
    """
    reason = unavailable_reason()
    if reason is not None:
        if REQUIRE_SERVICES:
            pytest.fail(f"network testbed required (TESSERA_REQUIRE_SERVICES=1): {reason}")
        pytest.skip(f"network testbed unavailable: {reason}")
    made: list[Testbed] = []

    def make(hosts: int = 2, **options: Any) -> Testbed:
        testbed = Testbed(hosts, **options)
        made.append(testbed)
        return testbed.start()

    try:
        yield make
    finally:
        for testbed in made:
            testbed.close()


@pytest.fixture
def testbed(make_testbed: MakeTestbed) -> Testbed:
    """Two simulated hosts joined by 100 Mbit/s links."""
    return make_testbed(2, rate_mbit=100.0)


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Run the test's torch work on one thread: the suite shares two cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
