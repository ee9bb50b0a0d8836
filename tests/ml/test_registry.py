"""The control plane's view of the library: metadata without torch."""

from __future__ import annotations

import subprocess
import sys

from tessera_ml.registry import all_specs

PROBE = """
import sys
from tessera_ml.registry import all_specs
from tessera_ml.data.refs import parse_ref
from tessera_ml.models.spec import parse_model_spec
specs = all_specs()
for spec in specs.values():
    spec.describe()
parse_ref("generated:clicks?rows=10")
parse_model_spec({"kind": "cnn"})
print(",".join(sorted(specs)))
print("torch" in sys.modules)
"""


def test_registry_specs_data_refs_and_model_specs_import_without_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    names, torch_loaded = done.stdout.split()
    assert "ddp" in names.split(",")
    assert torch_loaded == "False"


def test_every_spec_describes_itself_with_a_schema() -> None:
    for name, spec in all_specs().items():
        described = spec.describe()
        assert described["name"] == name
        assert described["config_schema"]["type"] == "object"
        assert described["roles"]


def test_a_described_schema_is_the_models_own_and_each_caller_gets_a_copy() -> None:
    for spec in all_specs().values():
        first = spec.describe()["config_schema"]
        assert first == spec.config_model.model_json_schema()
        first["properties"] = {}  # a caller changing its copy changes nobody else's
        assert spec.describe()["config_schema"] == spec.config_model.model_json_schema()
