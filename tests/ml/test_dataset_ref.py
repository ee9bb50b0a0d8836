"""Every algorithm whose configuration names a dataset refuses a malformed reference at once."""

from __future__ import annotations

import pydantic
import pytest

from tessera_ml.data.refs import DatasetRef
from tessera_ml.registry import all_specs

WITH_DATASET = sorted(n for n, s in all_specs().items() if "dataset" in s.config_model.model_fields)


class Holder(pydantic.BaseModel):
    ref: DatasetRef


def test_dataset_ref_accepts_valid_and_refuses_malformed_references() -> None:
    assert Holder(ref="sklearn:digits?shard=0/2").ref == "sklearn:digits?shard=0/2"
    for bad in ("bogus:x", "sklearn:nope", "x" * 1025):
        with pytest.raises(pydantic.ValidationError):
            Holder(ref=bad)


@pytest.mark.parametrize("name", WITH_DATASET)
def test_config_refuses_a_malformed_dataset(name: str) -> None:
    with pytest.raises(pydantic.ValidationError) as err:
        all_specs()[name].parse_config({"dataset": "bogus:x"})
    assert err.value.errors()[0]["loc"] == ("dataset",)
