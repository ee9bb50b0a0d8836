"""Lookup-or-insert throughput of the table against two dict baselines.

- the strong one, what a user would write without a dynamic table: a dict from id to row index,
  one growing tensor of rows, ``index_select`` to read a batch (``IndexedRows``);
- the weak one, kept as an extra row: a dict from id to a tensor per row, read row by row.

All serve the same stream of batches (deduplicated Zipf ids over a large id space, so the table
keeps growing), alternating batch by batch, and return the embeddings of each batch; the
baselines create their new rows with the same vectorised initialiser, so the comparison is
about the lookup structure alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from tessera_ml.algorithms.param_server.hashing import init_rows
from tessera_ml.algorithms.param_server.table import DynamicTable
from tessera_ml.data.clicks import ClickLog


@dataclass
class LookupResult:
    rows: int
    ids_served: int
    table_seconds: float
    dict_seconds: float
    table_cpu_seconds: float
    dict_cpu_seconds: float
    strong_seconds: float
    strong_cpu_seconds: float
    resident_bytes: int
    row_payload_bytes: int


class _Clock:
    """Wall and CPU seconds spent inside ``with`` blocks."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def __enter__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.thread_time()

    def __exit__(self, *exc: object) -> None:
        self.wall += time.perf_counter() - self._wall
        self.cpu += time.thread_time() - self._cpu


def id_batches(rows_wanted: int, batch: int, seed: int) -> list[torch.Tensor]:
    """Unique ids per batch until their union reaches ``rows_wanted`` distinct ids."""
    log = ClickLog(fields=1, ids_per_field=1 << 34, zipf=1.1, seed=seed)
    batches: list[torch.Tensor] = []
    seen = 0
    start = 0
    union = torch.empty(0, dtype=torch.int64)
    while seen < rows_wanted:
        ids = log.ids(torch.arange(start, start + batch)).flatten().unique()
        start += batch
        batches.append(ids)
        union = torch.cat([union, ids]).unique()
        seen = union.numel()
    return batches


def _dict_serve(
    store: dict[int, torch.Tensor], ids: torch.Tensor, dim: int, slots: int
) -> torch.Tensor:
    keys = ids.tolist()
    missing = [i for i, k in enumerate(keys) if k not in store]
    if missing:
        fresh = torch.zeros((len(missing), dim + slots))
        fresh[:, :dim] = init_rows(ids[missing], dim, 0, 0.05)
        for i, row in zip(missing, fresh.unbind(0), strict=True):
            store[keys[i]] = row.clone()
    return torch.stack([store[k][:dim] for k in keys])


class IndexedRows:
    """Rows in one tensor that doubles when full, found through a dict from id to row index."""

    def __init__(self, dim: int, slots: int) -> None:
        self.dim = dim
        self.index: dict[int, int] = {}
        self.rows = torch.zeros((1024, dim + slots))

    def serve(self, ids: torch.Tensor) -> torch.Tensor:
        keys = ids.tolist()
        found = [self.index.get(k, -1) for k in keys]
        missing = [i for i, at in enumerate(found) if at < 0]
        if missing:
            first = len(self.index)
            while first + len(missing) > self.rows.shape[0]:
                grown = torch.zeros((2 * self.rows.shape[0], self.rows.shape[1]))
                grown[: self.rows.shape[0]] = self.rows
                self.rows = grown
            self.rows[first : first + len(missing), : self.dim] = init_rows(
                ids[missing], self.dim, 0, 0.05
            )
            for offset, i in enumerate(missing):
                self.index[keys[i]] = found[i] = first + offset
        at = torch.tensor(found, dtype=torch.int64)
        return self.rows.index_select(0, at)[:, : self.dim]


def run_lookup_bench(*, rows: int, batch: int, dim: int, slots: int, seed: int = 0) -> LookupResult:
    """Serve each batch with the table, then with each baseline, alternating, so that all meet
    the same load on a shared host; wall and CPU time are both kept."""
    batches = id_batches(rows, batch, seed)
    table = DynamicTable(dim=dim, slots=slots, seed=0)
    store: dict[int, torch.Tensor] = {}
    strong = IndexedRows(dim, slots)
    table_clock, dict_clock, strong_clock = _Clock(), _Clock(), _Clock()
    for ids in batches:
        with table_clock:
            table.embeddings(table.find_or_insert(ids), ids)
        with strong_clock:
            strong.serve(ids)
        with dict_clock:
            _dict_serve(store, ids, dim, slots)
    assert len(store) == len(strong.index) == table.num_rows
    return LookupResult(
        rows=table.num_rows,
        ids_served=sum(b.numel() for b in batches),
        table_seconds=table_clock.wall,
        dict_seconds=dict_clock.wall,
        table_cpu_seconds=table_clock.cpu,
        dict_cpu_seconds=dict_clock.cpu,
        strong_seconds=strong_clock.wall,
        strong_cpu_seconds=strong_clock.cpu,
        resident_bytes=table.resident_bytes,
        row_payload_bytes=table.row_payload_bytes,
    )
