"""Job validation and slicing rules of hier_sync (no processes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tessera_ml.algorithms.hier_sync.slicing import (
    DeviceCapacity,
    SliceTooLarge,
    capacity_fractions,
    check_fits,
    even_bounds,
    piece_bounds,
)
from tessera_ml.algorithms.hier_sync.spec import SPEC
from tessera_ml.algorithms.hier_sync.topology import topology_from_plan
from tessera_ml.spec import Assignment, PlanError


def _plan(*assignments: dict[str, object], **config: object):  # type: ignore[no-untyped-def]
    return SPEC.make_plan(
        [Assignment.model_validate(a) for a in assignments], SPEC.parse_config(config)
    )


def test_nodes_are_cut_per_assignment_and_numbered_within_the_node() -> None:
    plan = _plan(
        {"party": "alice", "role": "node", "processes": 4, "options": {"devices_per_node": 2}},
        {"party": "bob", "role": "node", "processes": 2},
    )
    topology = topology_from_plan(plan)
    assert topology.nodes == ((0, 1), (2, 3), (4, 5))
    assert topology.locate(3) == (1, 1)
    assert topology.node_ranks(3) == (2, 3)
    assert topology.peer_ranks(3) == (1, 3, 5)


def test_nodes_of_different_sizes_are_rejected_with_a_reason() -> None:
    with pytest.raises(PlanError) as caught:
        _plan(
            {"party": "alice", "role": "node", "processes": 2},
            {"party": "bob", "role": "node", "processes": 3},
        )
    assert caught.value.code == "uneven_nodes"
    assert "same number of devices" in caught.value.reason


def test_devices_per_node_must_divide_the_processes() -> None:
    with pytest.raises(PlanError) as caught:
        _plan({"party": "a", "role": "node", "processes": 3, "options": {"devices_per_node": 2}})
    assert caught.value.code == "devices_per_node"
    assert caught.value.loc == ("assignments", 0)


def test_capacities_need_one_entry_per_device_and_a_proportional_mode() -> None:
    two = {"party": "a", "role": "node", "processes": 2}
    with pytest.raises(PlanError) as caught:
        _plan(two, slicing="memory", capacities=[1.0, 2.0, 3.0])
    assert caught.value.code == "capacities_length"
    with pytest.raises(PlanError) as caught:
        _plan(two, capacities=[1.0, 2.0])
    assert caught.value.code == "capacities_unused"
    assert len(_plan(two, slicing="memory", capacities=[1.0, 2.0])) == 2


def test_spec_imports_without_torch() -> None:
    probe = "import sys, tessera_ml.algorithms.hier_sync.spec; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_config_schema_describes_every_field() -> None:
    schema = SPEC.describe()["config_schema"]
    described = {k for k, v in schema["properties"].items() if v.get("description")}
    assert set(schema["properties"]) - described == set()


def test_piece_bounds_follow_fractions_on_aligned_offsets() -> None:
    bounds = piece_bounds(5, 1005, [0.7, 0.3], 16)
    assert bounds[0] == 5 and bounds[-1] == 1005
    assert bounds[1] % 16 == 0
    assert abs((bounds[1] - 5) / 1000 - 0.7) <= 16 / 1000
    assert piece_bounds(0, 8, [0.5, 0.5], 16) in ([0, 0, 8], [0, 8, 8])
    assert even_bounds(100, 4, 1) == [0, 25, 50, 75, 100]


def test_capacity_of_a_device_number_is_its_smallest_across_nodes() -> None:
    reports = [
        DeviceCapacity(node=0, number=0, memory=6.0, compute=1.0),
        DeviceCapacity(node=0, number=1, memory=4.0, compute=3.0),
        DeviceCapacity(node=1, number=0, memory=9.0, compute=1.0),
        DeviceCapacity(node=1, number=1, memory=2.0, compute=3.0),
    ]
    assert capacity_fractions("equal", reports, 2) == [0.5, 0.5]
    assert capacity_fractions("memory", reports, 2) == pytest.approx([0.75, 0.25])
    assert capacity_fractions("memory_and_compute", reports, 2) == pytest.approx([0.5, 0.5])
    with pytest.raises(ValueError, match="positive"):
        capacity_fractions("memory", [DeviceCapacity(0, 0, 0.0, 1.0)], 1)


def test_memory_slices_fit_every_budget_that_equal_slices_overflow() -> None:
    reports = [
        DeviceCapacity(node, number, budget, 1.0, budget)
        for node in (0, 1)
        for number, budget in enumerate([900.0, 300.0])
    ]
    memory = capacity_fractions("memory", reports, 2)
    check_fits("memory", memory, reports, 1000.0)
    with pytest.raises(SliceTooLarge) as caught:
        check_fits("equal", [0.5, 0.5], reports, 1000.0)
    assert caught.value.code == "slice_exceeds_memory"
    assert "device 1 of node 0 has 300 bytes free" in caught.value.reason
    unknown = [DeviceCapacity(r.node, r.number, r.memory, 1.0) for r in reports]
    check_fits("equal", [0.5, 0.5], unknown, 1000.0)
