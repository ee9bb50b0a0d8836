"""The list of algorithms, discovered from ``tessera_ml.algorithms.<name>.spec.SPEC``.

Importing the registry never imports torch: spec modules hold metadata only.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from tessera_ml import algorithms
from tessera_ml.spec import AlgorithmSpec


@cache
def all_specs() -> dict[str, AlgorithmSpec]:
    """Every algorithm shipped with Tessera, by name."""
    specs: dict[str, AlgorithmSpec] = {}
    for info in sorted(pkgutil.iter_modules(algorithms.__path__), key=lambda m: m.name):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"{algorithms.__name__}.{info.name}.spec")
        except ModuleNotFoundError as exc:
            if exc.name == f"{algorithms.__name__}.{info.name}.spec":
                continue
            raise
        spec = getattr(module, "SPEC", None)
        if isinstance(spec, AlgorithmSpec):
            specs[spec.name] = spec
    return specs


def get_spec(name: str) -> AlgorithmSpec | None:
    return all_specs().get(name)
