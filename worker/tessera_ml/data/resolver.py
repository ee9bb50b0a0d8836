"""``resolve(ref)``: a dataset reference (see ``tessera_ml.data.refs``) to tensors."""

from __future__ import annotations

from pathlib import Path

from tessera_ml.data.clicks import ClickParams, make_clicks
from tessera_ml.data.files import cast_target, infer_task, read_file
from tessera_ml.data.partition import select_columns, shard_dataset
from tessera_ml.data.refs import DataRef, DataRefError, parse_ref
from tessera_ml.data.sklearn_sets import load_sklearn
from tessera_ml.data.tabular import Dataset, Table, Task, split_by_id, standardize
from tessera_ml.host_paths import host_path


def resolve(ref: str | DataRef, data_root: Path | str | None = None) -> Dataset:
    """Load the dataset a reference names. With a ``data_root`` (on a worker) a file must lie
    inside it, and a relative path is taken there (``tessera_ml.host_paths``)."""
    parsed = parse_ref(ref) if isinstance(ref, str) else ref
    test = parsed.option("test", "0.2") or "0.2"
    split_seed = _int(parsed, "split_seed", 0)
    if parsed.scheme == "sklearn":
        data = load_sklearn(
            parsed.target,
            test_fraction=_fraction(test),
            split_seed=split_seed,
            scale=_flag(parsed, "standardize", True),
        )
    elif parsed.scheme == "generated":
        data = make_clicks(
            _click_params(parsed), test_fraction=_fraction(test), split_seed=split_seed
        )
    else:
        data = _resolve_file(parsed, test, split_seed, data_root)
    return _post_process(parsed, data)


def _resolve_file(
    ref: DataRef, test: str, split_seed: int, data_root: Path | str | None
) -> Dataset:
    label = ref.option("label", "label") or None
    id_column = ref.option("id", "id") or None
    loaded = read_file(_path(ref.target, data_root), label=label, id_column=id_column)
    task_name = ref.option("task")
    task: Task = infer_task(loaded.table.y) if task_name is None else _task(task_name)
    table = _typed(loaded.table, task)
    if test.startswith("file:"):
        other = read_file(_path(test[5:], data_root), label=label, id_column=id_column)
        if other.columns != loaded.columns:
            raise DataRefError("column_mismatch", f"{test} has other columns than {ref.target}")
        train, held_out = table, _typed(other.table, task)
    else:
        train_idx, test_idx = split_by_id(table.ids, _fraction(test), split_seed)
        train, held_out = table.rows(train_idx), table.rows(test_idx)
    if _flag(ref, "standardize", False):
        train, held_out = standardize(train, held_out)
    return Dataset(
        name=f"file:{ref.target}",
        train=train,
        test=held_out,
        task=task,
        columns=loaded.columns,
        num_classes=_num_classes(task, train, held_out),
    )


def _typed(table: Table, task: Task) -> Table:
    return Table(table.x, cast_target(table.y, task), table.ids)


def _num_classes(task: Task, *tables: Table) -> int:
    if task == "regression":
        return 1
    labels = [t.y for t in tables if t.y is not None and len(t) > 0]
    return max([2] + [int(y.max()) + 1 for y in labels])


def _post_process(ref: DataRef, data: Dataset) -> Dataset:
    columns = ref.option("columns")
    if columns:
        data = select_columns(data, _column_selection(columns, data), keep_labels=True)
    shard = ref.shard()
    if shard is not None:
        data = shard_dataset(data, *shard)
    return data


def _column_selection(raw: str, data: Dataset) -> slice | list[int]:
    if ":" in raw:
        start, _, stop = raw.partition(":")
        try:
            return slice(int(start) if start else None, int(stop) if stop else None)
        except ValueError as exc:
            raise DataRefError("bad_columns", f"columns={raw!r} is not START:STOP") from exc
    names = [c.strip() for c in raw.split(",") if c.strip()]
    missing = [n for n in names if n not in data.columns]
    if missing:
        raise DataRefError("bad_columns", f"{data.name} has no columns {missing}")
    return [data.columns.index(n) for n in names]


def _click_params(ref: DataRef) -> ClickParams:
    base = ClickParams()
    try:
        return ClickParams(
            rows=_int(ref, "rows", base.rows),
            fields=_int(ref, "fields", base.fields),
            ids_per_field=_int(ref, "ids", base.ids_per_field),
            zipf=float(ref.option("zipf", str(base.zipf)) or base.zipf),
            dim=_int(ref, "dim", base.dim),
            seed=_int(ref, "seed", base.seed),
            bias=float(ref.option("bias", str(base.bias)) or base.bias),
        )
    except ValueError as exc:
        raise DataRefError("bad_option", f"{ref}: {exc}") from exc


def _path(target: str, data_root: Path | str | None) -> Path:
    roots = [Path(data_root)] if data_root is not None else []
    return host_path(target, roots, "dataset file", DataRefError)


def _int(ref: DataRef, key: str, default: int) -> int:
    raw = ref.option(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise DataRefError("bad_option", f"{key}={raw!r} is not an integer") from exc


def _fraction(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError as exc:
        raise DataRefError(
            "bad_option", f"test={raw!r} is neither a fraction nor file:PATH"
        ) from exc
    if not 0.0 < value < 1.0:
        raise DataRefError("bad_option", f"test fraction must be in (0, 1), got {value}")
    return value


def _flag(ref: DataRef, key: str, default: bool) -> bool:
    raw = ref.option(key)
    if raw is None:
        return default
    return raw.lower() in {"1", "true", "yes", "on"}


def _task(raw: str) -> Task:
    if raw not in ("classification", "binary", "regression"):
        raise DataRefError("bad_option", "task must be classification, binary or regression")
    return raw  # type: ignore[return-value]
