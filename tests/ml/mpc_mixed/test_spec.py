import pytest
from pydantic import ValidationError

from tessera_ml.algorithms.mpc_mixed.spec import SPEC, MpcMixedConfig
from tessera_ml.registry import get_spec
from tessera_ml.spec import Assignment, PlanError

BASE = [
    {"party": "alice", "role": "compute"},
    {"party": "bob", "role": "compute"},
    {"party": "carol", "role": "dealer"},
    {"party": "alice", "role": "features"},
    {"party": "bob", "role": "labels"},
]


def _plan(assignments: list[dict[str, object]], **config: object) -> list[str]:
    cfg = SPEC.parse_config(config)
    slots = SPEC.make_plan([Assignment.model_validate(a) for a in assignments], cfg)
    return [s.role for s in slots]


def test_registered_and_plans_compute_ranks_first() -> None:
    assert get_spec("mpc_mixed") is SPEC
    assert _plan(BASE) == ["compute", "compute", "dealer", "features", "labels"]
    schema = SPEC.describe()["config_schema"]
    assert all("description" in p for p in schema["properties"].values())


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({2: {"party": "alice", "role": "dealer"}}, "dealer_computes"),
        ({1: {"party": "alice", "role": "compute"}}, "duplicate_assignment"),
        ({0: {"party": "alice", "role": "compute", "processes": 2}}, "too_many_processes"),
    ],
)
def test_rejects_insecure_or_unsupported_plans(
    change: dict[int, dict[str, object]], code: str
) -> None:
    assignments = [change.get(i, a) for i, a in enumerate(BASE)]
    with pytest.raises(PlanError) as err:
        _plan(assignments)
    assert err.value.code == code


def test_model_goes_only_to_named_job_parties_never_the_dealer() -> None:
    assert len(_plan(BASE, reveal_to=["bob"])) == 5
    with pytest.raises(PlanError) as err:
        _plan(BASE, reveal_to=["carol"])
    assert err.value.code == "reveal_to_dealer"
    with pytest.raises(PlanError) as err:
        _plan(BASE, reveal_to=["mallory"])
    assert err.value.code == "reveal_unknown_party"


def test_config_validates_precisions() -> None:
    with pytest.raises(ValidationError):
        MpcMixedConfig(ring32_frac=14, ring64_frac=14)
    with pytest.raises(ValidationError):
        MpcMixedConfig(mode="all16")  # type: ignore[arg-type]
    assert MpcMixedConfig(mode="all32", ring32_frac=14, ring64_frac=14).mode == "all32"
    with pytest.raises(ValidationError, match="comparison"):
        MpcMixedConfig(comparison="ripple")  # type: ignore[arg-type]
    assert MpcMixedConfig().comparison == "tree"
    with pytest.raises(ValidationError, match="link"):
        MpcMixedConfig(link="carrier-pigeon")  # type: ignore[arg-type]
    assert MpcMixedConfig().link == "direct"


def test_local_truncation_is_an_option_of_the_z64_ring_only() -> None:
    assert MpcMixedConfig().truncation == "masked"
    assert MpcMixedConfig(mode="all64", truncation="local").truncation == "local"
    assert MpcMixedConfig(truncation="local").truncation == "local"
    with pytest.raises(ValidationError, match="all32"):
        MpcMixedConfig(mode="all32", truncation="local")
    with pytest.raises(ValidationError, match="truncation"):
        MpcMixedConfig(truncation="round")  # type: ignore[arg-type]
