"""A small model zoo built from JSON specs: MLP, a small CNN, an embedding click model, and a
``module:callable`` hook. ``tessera_ml.models.spec`` imports without torch; ``build_model``
loads torch on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tessera_ml.models.spec import (
    ClickModelSpec,
    CNNSpec,
    CustomSpec,
    MLPSpec,
    ModelSpec,
    parse_model_spec,
)

if TYPE_CHECKING:
    from tessera_ml.models.zoo import build_model, count_parameters


def __getattr__(name: str) -> Any:
    if name in ("build_model", "count_parameters"):
        from tessera_ml.models import zoo

        return getattr(zoo, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CNNSpec",
    "ClickModelSpec",
    "CustomSpec",
    "MLPSpec",
    "ModelSpec",
    "build_model",
    "count_parameters",
    "parse_model_spec",
]
