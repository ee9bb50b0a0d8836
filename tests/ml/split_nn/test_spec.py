"""The split_nn spec: role cardinality, plan rules and the configuration schema (no torch)."""

from __future__ import annotations

import importlib

import pytest
from pydantic import ValidationError

from tessera_ml.algorithms.split_nn.spec import SPEC, SplitNNConfig
from tessera_ml.registry import get_spec
from tessera_ml.spec import Assignment, PlanError


def _assign(*roles: str, **extra: object) -> list[Assignment]:
    return [
        Assignment.model_validate({"party": f"p{i}", "role": r, **extra})
        for i, r in enumerate(roles)
    ]


def test_registry_finds_split_nn_with_its_roles() -> None:
    spec = get_spec("split_nn")
    assert spec is SPEC
    assert [r.name for r in spec.roles] == ["feature", "middle", "label"]
    schema = spec.describe()["config_schema"]
    for name, prop in schema["properties"].items():
        assert "description" in prop, name


def test_plan_orders_features_then_middle_then_label() -> None:
    cfg = SplitNNConfig()
    plan = SPEC.make_plan(_assign("label", "feature", "middle", "feature"), cfg)
    assert [s.role for s in plan] == ["feature", "feature", "middle", "label"]
    assert [s.party for s in plan] == ["p1", "p3", "p2", "p0"]


@pytest.mark.parametrize(
    ("roles", "code"),
    [
        (("feature",), "role_cardinality"),
        (("label",), "role_cardinality"),
        (("feature", "middle", "middle", "label"), "role_cardinality"),
        (("feature", "label", "label"), "role_cardinality"),
    ],
)
def test_role_cardinality_is_enforced(roles: tuple[str, ...], code: str) -> None:
    with pytest.raises(PlanError) as err:
        SPEC.make_plan(_assign(*roles), SplitNNConfig())
    assert err.value.code == code


def test_one_process_per_party_and_a_dataless_middle() -> None:
    with pytest.raises(PlanError) as err:
        SPEC.make_plan(_assign("feature", "label", processes=2), SplitNNConfig())
    assert err.value.code == "too_many_processes"
    middle_with_data = [
        Assignment(party="a", role="feature"),
        Assignment(party="m", role="middle", dataset="sklearn:digits"),
        Assignment(party="c", role="label"),
    ]
    with pytest.raises(PlanError) as err:
        SPEC.make_plan(middle_with_data, SplitNNConfig())
    assert err.value.code == "middle_has_data"


def test_config_rejects_what_cannot_run() -> None:
    with pytest.raises(ValidationError):
        SplitNNConfig.model_validate({"bottom": {"hidden": [8]}})
    with pytest.raises(ValidationError):
        SplitNNConfig.model_validate({"middle": {"kind": "custom"}})
    with pytest.raises(ValidationError):
        SplitNNConfig.model_validate({"compression": "int4"})
    with pytest.raises(PlanError) as err:
        SPEC.make_plan(_assign("feature", "label"), SplitNNConfig(batch_size=2, micro_batches=4))
    assert err.value.code == "micro_batches"


def test_entry_point_resolves_to_the_rank_function() -> None:
    module, _, func = SPEC.entry_point.partition(":")
    assert callable(getattr(importlib.import_module(module), func))
