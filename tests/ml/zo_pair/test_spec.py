"""Plan rules and configuration schema of zo_pair, without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from tessera_ml.registry import get_spec
from tessera_ml.spec import Assignment, PlanError


def _plan(*assignments: dict[str, object]) -> list[object]:
    spec = get_spec("zo_pair")
    assert spec is not None
    cfg = spec.parse_config({})
    return list(spec.make_plan([Assignment.model_validate(a) for a in assignments], cfg))


def test_pairs_may_span_parties_and_processes() -> None:
    slots = _plan(
        {"party": "alice", "role": "processor", "processes": 2},
        {"party": "bob", "role": "processor", "processes": 2},
    )
    assert [s.role_rank for s in slots] == [0, 1, 2, 3]  # type: ignore[attr-defined]


@pytest.mark.parametrize("counts", [(1,), (3,), (2, 1)])
def test_an_odd_number_of_processors_is_refused(counts: tuple[int, ...]) -> None:
    assignments = [
        {"party": f"p{i}", "role": "processor", "processes": n} for i, n in enumerate(counts)
    ]
    with pytest.raises(PlanError) as err:
        _plan(*assignments)
    assert err.value.code == "processor_count"


def test_both_processors_of_a_pair_read_the_same_dataset() -> None:
    with pytest.raises(PlanError) as err:
        _plan(
            {"party": "alice", "role": "processor", "processes": 1, "dataset": "digits"},
            {"party": "bob", "role": "processor", "processes": 1, "dataset": "wine"},
        )
    assert err.value.code == "pair_dataset"
    assert err.value.loc == ("assignments", 1, "dataset")


def test_config_schema_describes_every_field_and_rejects_unknowns() -> None:
    spec = get_spec("zo_pair")
    assert spec is not None
    schema = spec.describe()["config_schema"]
    missing = [k for k, v in schema["properties"].items() if not v.get("description")]
    assert missing == []
    with pytest.raises(ValidationError):
        spec.parse_config({"directions": "everywhere"})
    with pytest.raises(ValidationError):
        spec.parse_config({"model": {"kind": "mlp", "hidden": [0]}})
    with pytest.raises(ValidationError):
        spec.parse_config({"dataset": "ftp:digits"})
    with pytest.raises(ValidationError):
        spec.parse_config({"learning_rate": 0.1})


def test_spec_module_imports_no_torch() -> None:
    code = (
        "import sys; import tessera_ml.algorithms.zo_pair.spec; "
        "sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
