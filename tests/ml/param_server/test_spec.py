"""Roles, configuration schema and plan rules (no torch needed)."""

from __future__ import annotations

from typing import Any

import pytest

from tessera_ml.algorithms.param_server.spec import SPEC, ParamServerConfig
from tessera_ml.registry import get_spec
from tessera_ml.spec import Assignment, PlanError


def _assignments(**worker: Any) -> list[Assignment]:
    return [
        Assignment(party="alice", role="server", processes=2),
        Assignment(party="bob", role="worker", processes=2, **worker),
        Assignment(party="carol", role="worker"),
    ]


def test_registered_with_every_field_described() -> None:
    assert get_spec("param_server") is SPEC
    schema = SPEC.describe()["config_schema"]
    for name, prop in schema["properties"].items():
        assert prop.get("description"), name
    for name, prop in schema["$defs"]["ClickLogConfig"]["properties"].items():
        assert prop.get("description"), name


def test_plan_puts_servers_first_and_numbers_each_role() -> None:
    slots = SPEC.make_plan(_assignments(), SPEC.parse_config({}))
    assert [(s.role, s.role_rank, s.party) for s in slots] == [
        ("server", 0, "alice"),
        ("server", 1, "alice"),
        ("worker", 0, "bob"),
        ("worker", 1, "bob"),
        ("worker", 2, "carol"),
    ]


def test_both_roles_are_required() -> None:
    with pytest.raises(PlanError) as err:
        SPEC.make_plan([Assignment(party="a", role="worker")], SPEC.parse_config({}))
    assert err.value.code == "role_cardinality"


@pytest.mark.parametrize(
    ("config", "code", "field"),
    [
        ({"staleness": 2}, "staleness_without_async", "staleness"),
        ({"ttl_steps": 5}, "option_without_effect", "ttl_steps"),
        ({"eviction": "ttl", "max_rows": 5}, "option_without_effect", "max_rows"),
        ({"eviction": "lfu", "ttl_steps": 5}, "option_without_effect", "ttl_steps"),
    ],
)
def test_options_without_effect_are_refused(config: dict[str, Any], code: str, field: str) -> None:
    with pytest.raises(PlanError) as err:
        SPEC.make_plan(_assignments(), SPEC.parse_config(config))
    assert err.value.code == code
    assert err.value.loc == ("config", field)


def test_async_staleness_and_eviction_options_are_accepted() -> None:
    config = SPEC.parse_config(
        {"mode": "async", "staleness": 3, "eviction": "lfu", "max_rows": 10, "evict_every": 5}
    )
    assert isinstance(config, ParamServerConfig)
    assert len(SPEC.make_plan(_assignments(), config)) == 5


def test_worker_datasets_are_checked_and_servers_hold_none() -> None:
    config = SPEC.parse_config({})
    assert len(SPEC.make_plan(_assignments(dataset="generated:clicks?rows=500"), config)) == 5
    with pytest.raises(PlanError) as err:
        SPEC.make_plan(_assignments(dataset="ftp:clicks"), config)
    assert err.value.code == "unknown_scheme"
    assert err.value.loc == ("assignments", 1, "dataset")
    on_server = [Assignment(party="a", role="server", dataset="generated:clicks")]
    with pytest.raises(PlanError) as err:
        SPEC.make_plan([*on_server, Assignment(party="b", role="worker")], config)
    assert err.value.code == "dataset_on_server"


def test_block_rows_must_be_a_power_of_two() -> None:
    with pytest.raises(ValueError, match="power of two"):
        ParamServerConfig(block_rows=1000)
