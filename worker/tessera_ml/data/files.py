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

from tessera_ml.data.tabular import Table, Task


@dataclass(frozen=True)
class LoadedFile:
    table: Table
    columns: tuple[str, ...]


def read_file(
    path: Path, *, label: str | None = "label", id_column: str | None = "id"
) -> LoadedFile:
    """Read one file; ``label``/``id_column`` name those columns when present (None: absent)."""
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return _read_npz(path)
    if suffix not in (".csv", ".parquet"):
        raise ValueError(f"unsupported file type {suffix!r} (use .csv, .parquet or .npz)")
    columns = _read_columns(path)
    y = None
    if label is not None and label in columns:
        y = torch.from_numpy(columns.pop(label))
    if id_column is not None and id_column in columns:
        ids = torch.from_numpy(columns.pop(id_column).astype(np.int64))
    else:
        ids = torch.arange(len(next(iter(columns.values()), [])), dtype=torch.int64)
    non_numeric = [c for c, v in columns.items() if not np.issubdtype(v.dtype, np.number)]
    if non_numeric:
        raise ValueError(f"{path.name}: non-numeric feature columns {non_numeric}")
    if not columns:
        raise ValueError(f"{path.name}: no feature columns")
    x = torch.from_numpy(np.stack([v.astype(np.float32) for v in columns.values()], axis=1))
    _check_unique(ids, path)
    return LoadedFile(Table(x, y, ids), tuple(columns))


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
            raise ValueError(f"{path.name}: an NPZ dataset needs an array named 'x'")
        x_np = np.asarray(arrays["x"])
        x = torch.from_numpy(x_np.reshape(x_np.shape[0], -1).astype(np.float32))
        y = torch.from_numpy(np.asarray(arrays["y"])) if "y" in arrays else None
        if "ids" in arrays:
            ids = torch.from_numpy(np.asarray(arrays["ids"]).astype(np.int64))
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
        raise ValueError(f"{path.name}: sample ids are not unique")
