"""Datasets as tensors: bundled scikit-learn sets, a generated click log, user files.

``resolve("sklearn:digits")`` loads what a reference names (syntax in ``tessera_ml.data.refs``,
which imports without torch); ``tessera_ml.data.partition`` splits by rows or columns and aligns
vertically split parties by sample id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tessera_ml.data.clicks import ClickParams, make_clicks
    from tessera_ml.data.partition import (
        align_across,
        align_tables,
        select_columns,
        shard_dataset,
        shard_rows,
        split_columns,
    )
    from tessera_ml.data.resolver import resolve
    from tessera_ml.data.sklearn_sets import load_sklearn
    from tessera_ml.data.tabular import Dataset, Table

from tessera_ml.data.refs import DataRef, DataRefError, parse_ref

_LAZY = {
    "ClickParams": "clicks",
    "make_clicks": "clicks",
    "align_across": "partition",
    "align_tables": "partition",
    "select_columns": "partition",
    "shard_dataset": "partition",
    "shard_rows": "partition",
    "split_columns": "partition",
    "resolve": "resolver",
    "load_sklearn": "sklearn_sets",
    "Dataset": "tabular",
    "Table": "tabular",
}


def __getattr__(name: str) -> Any:
    """Torch-backed names load on first use, so ``parse_ref`` stays torch-free."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ClickParams",
    "DataRef",
    "DataRefError",
    "Dataset",
    "Table",
    "align_across",
    "align_tables",
    "load_sklearn",
    "make_clicks",
    "parse_ref",
    "resolve",
    "select_columns",
    "shard_dataset",
    "shard_rows",
    "split_columns",
]
