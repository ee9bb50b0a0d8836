"""Horizontal (by row) and vertical (by column) partitioning, and alignment by sample id."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from tessera_ml.data.tabular import Dataset, Table

if TYPE_CHECKING:
    from tessera_ml.comm.base import Communicator, Group


def shard_rows(table: Table, index: int, count: int) -> Table:
    """Rows ``index, index + count, …``: near-equal shards that together cover the table."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard {index}/{count} needs 0 <= index < count")
    return table.rows(torch.arange(index, len(table), count))


def shard_dataset(data: Dataset, index: int, count: int) -> Dataset:
    """Horizontal partition of the training rows; every shard keeps the whole test split."""
    return data.with_tables(shard_rows(data.train, index, count), data.test)


def column_ranges(num_columns: int, parts: int) -> list[tuple[int, int]]:
    """Contiguous near-equal column ranges ``[start, stop)`` for a vertical split."""
    if not 1 <= parts <= num_columns:
        raise ValueError(f"cannot split {num_columns} columns into {parts} parts")
    bounds = [round(i * num_columns / parts) for i in range(parts + 1)]
    return list(itertools.pairwise(bounds))


def select_columns(
    data: Dataset, columns: Sequence[int] | slice, *, keep_labels: bool = True
) -> Dataset:
    """Vertical partition: the given feature columns; labels dropped unless ``keep_labels``."""
    index = (
        torch.arange(data.num_features)[columns]
        if isinstance(columns, slice)
        else torch.tensor(list(columns), dtype=torch.int64)
    )
    if index.numel() == 0:
        raise ValueError("a vertical partition needs at least one column")

    def cut(t: Table) -> Table:
        return Table(t.x[:, index], t.y if keep_labels else None, t.ids)

    return data.with_tables(
        cut(data.train),
        cut(data.test),
        columns=tuple(data.columns[i] for i in index.tolist()),
        image_shape=None,
    )


def split_columns(data: Dataset, parts: int, *, label_part: int | None = -1) -> list[Dataset]:
    """Split features into ``parts`` vertical partitions; only ``label_part`` keeps labels."""
    ranges = column_ranges(data.num_features, parts)
    label_index = None if label_part is None else range(parts)[label_part]
    return [
        select_columns(data, slice(a, b), keep_labels=(i == label_index))
        for i, (a, b) in enumerate(ranges)
    ]


def align_tables(tables: Sequence[Table]) -> list[Table]:
    """Keep the sample ids every table holds, in increasing id order, in every table."""
    common = tables[0].ids
    for t in tables[1:]:
        common = common[torch.isin(common, t.ids)]
    common = common.sort().values
    return [_select_ids(t, common) for t in tables]


def _select_ids(table: Table, ids: torch.Tensor) -> Table:
    order = table.ids.argsort()
    position = order[torch.searchsorted(table.ids[order], ids)]
    return table.rows(position)


def hash_ids(ids: torch.Tensor, salt: str) -> list[str]:
    """Salted digests of sample ids: what parties exchange instead of the ids themselves."""
    return [hashlib.sha256(f"{salt}:{int(i)}".encode()).hexdigest()[:24] for i in ids.tolist()]


def align_across(
    comm: Communicator, table: Table, group: Group | None = None, *, salt: str = "tessera"
) -> Table:
    """Collective: every member of ``group`` keeps the samples all members hold, in one order.

    Members exchange salted id digests (not raw ids); the shared order is by digest, so every
    party's row ``i`` is the same sample.
    """
    digests = hash_ids(table.ids, salt)
    everyone = comm.all_gather_data(digests, group)
    common = set(everyone[0]).intersection(*everyone[1:])
    mine = {d: i for i, d in enumerate(digests)}
    order = torch.tensor([mine[d] for d in sorted(common)], dtype=torch.int64)
    return table.rows(order)
