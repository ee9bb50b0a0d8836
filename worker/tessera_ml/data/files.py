"""User files read on the party's worker: CSV, Parquet and NPZ.

Tables (CSV, Parquet): every column but the label and id columns is a numeric feature. NPZ:
arrays ``x`` (``[rows, features]``), optional ``y`` and ``ids``. A party holding features only
(vertical split) simply has no label column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tessera_ml.data.refs import DataRefError
from tessera_ml.data.tabular import Table, Task


@dataclass(frozen=True)
class LoadedFile:
    table: Table
    columns: tuple[str, ...]


def read_file(
    path: Path, *, label: str | None = "label", id_column: str | None = "id"
) -> LoadedFile:
    """Read one file; ``label``/``id_column`` name those columns when present (None: absent).

    Every problem is a ``DataRefError`` whose message names the file and the problem but no
    value or column of it: the message reaches every party of the job. What the reader said
    (a row it could not parse, a value it could not convert) is kept as its cause, which only
    the worker's own log shows."""
    if not path.is_file():
        raise DataRefError("no_such_file", f"dataset file {path.name!r} does not exist")
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet", ".npz"):
        raise DataRefError(
            "unsupported_file", f"unsupported file type {suffix!r} (use .csv, .parquet or .npz)"
        )
    try:
        return _read_npz(path) if suffix == ".npz" else _read_table(path, label, id_column)
    except DataRefError:
        raise
    except Exception as exc:
        raise DataRefError(
            "unreadable_file",
            f"{path.name} cannot be read as {suffix[1:]} ({type(exc).__name__}); the worker's "
            "log has what the reader said",
        ) from exc


def _read_table(path: Path, label: str | None, id_column: str | None) -> LoadedFile:
    columns = _read_columns(path)
    y = None
    if label is not None and label in columns:
        y = torch.from_numpy(columns.pop(label))
    if id_column is not None and id_column in columns:
        ids = _ids(columns.pop(id_column), path, id_column)
    else:
        ids = torch.arange(len(next(iter(columns.values()), [])), dtype=torch.int64)
    non_numeric = [c for c, v in columns.items() if not np.issubdtype(v.dtype, np.number)]
    if non_numeric:
        raise DataRefError(
            "non_numeric_columns",
            f"{path.name}: {len(non_numeric)} feature column(s) are not numeric; the worker's "
            "log names them",
        ) from ValueError(f"non-numeric feature columns {non_numeric}")
    if not columns:
        raise DataRefError("no_features", f"{path.name}: no feature columns")
    x = torch.from_numpy(np.stack([v.astype(np.float32) for v in columns.values()], axis=1))
    _check_unique(ids, path)
    return LoadedFile(Table(x, y, ids), tuple(columns))


def _ids(values: np.ndarray, path: Path, name: str) -> torch.Tensor:
    try:
        return torch.from_numpy(np.asarray(values).astype(np.int64))
    except (ValueError, TypeError, OverflowError) as exc:
        raise DataRefError(
            "bad_ids", f"{path.name}: the id column {name!r} does not hold integers"
        ) from exc


def _read_columns(path: Path) -> dict[str, np.ndarray]:
    if path.suffix.lower() == ".csv":
        from pyarrow import csv

        table = csv.read_csv(path)
    else:
        from pyarrow import parquet

        table = parquet.read_table(path)
    return {
        name: np.array(table.column(name).to_numpy(zero_copy_only=False))
        for name in table.column_names
    }


def _read_npz(path: Path) -> LoadedFile:
    with np.load(path, allow_pickle=False) as arrays:
        if "x" not in arrays:
            raise DataRefError("no_features", f"{path.name}: an NPZ dataset needs an array 'x'")
        x_np = np.asarray(arrays["x"])
        x = torch.from_numpy(x_np.reshape(x_np.shape[0], -1).astype(np.float32))
        y = torch.from_numpy(np.asarray(arrays["y"])) if "y" in arrays else None
        if "ids" in arrays:
            ids = _ids(arrays["ids"], path, "ids")
        else:
            ids = torch.arange(x.shape[0], dtype=torch.int64)
    _check_unique(ids, path)
    return LoadedFile(Table(x, y, ids), tuple(f"x{i}" for i in range(x.shape[1])))


def infer_task(y: torch.Tensor | None) -> Task:
    """Integer labels: binary when {0, 1}, else classification; floats: regression."""
    if y is None or (y.is_floating_point() and not _is_integral(y)):
        return "regression"
    values = torch.unique(y)
    if values.numel() <= 2 and bool(((values == 0) | (values == 1)).all()):
        return "binary"
    return "classification"


def cast_target(y: torch.Tensor | None, task: Task) -> torch.Tensor | None:
    if y is None:
        return None
    if task == "classification":
        return y.to(torch.int64)
    return y.to(torch.float32)


def _is_integral(y: torch.Tensor) -> bool:
    return bool(torch.equal(y, y.round()))


def _check_unique(ids: torch.Tensor, path: Path) -> None:
    if torch.unique(ids).numel() != ids.numel():
        raise DataRefError("duplicate_ids", f"{path.name}: sample ids are not unique")
