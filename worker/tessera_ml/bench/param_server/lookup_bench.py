"""Lookup-or-insert throughput of the table against the baselines and the cost floor.

- the strong baseline, what a user would write without a dynamic table: a dict from id to row
  index, one growing tensor of rows, ``index_select`` to read a batch (``IndexedRows``);
- the weak one, kept as an extra row: a dict from id to a tensor per row, read row by row;
- the torch table (``DynamicTable``, the fallback where the compiled one is not built);
- the cost floor of any hash table on this CPU: one native hash factorisation of the whole id
  stream at once (pyarrow's ``dictionary_encode``), which neither creates rows nor reads them.

All tables serve the same stream of batches (deduplicated Zipf ids over a large id space, so
the table keeps growing), alternating batch by batch, and return the embeddings of each batch;
the baselines create their new rows with the same vectorised initialiser, so the comparison is
about the lookup structure alone. The compiled table runs on one thread (CPU time comparable
with the others) and, on its own copy, with ``threads`` threads (wall time).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import torch

from tessera_ml.algorithms.param_server import native
from tessera_ml.algorithms.param_server.hashing import init_rows
from tessera_ml.algorithms.param_server.native import NativeTable
from tessera_ml.algorithms.param_server.table import DynamicTable
from tessera_ml.data.clicks import ClickLog


class Clock:
    """Wall, thread-CPU and process-CPU seconds spent inside ``with`` blocks."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.process_cpu = 0.0

    def __enter__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.thread_time()
        self._process = time.process_time()

    def __exit__(self, *exc: object) -> None:
        self.wall += time.perf_counter() - self._wall
        self.cpu += time.thread_time() - self._cpu
        self.process_cpu += time.process_time() - self._process


@dataclass
class LookupResult:
    rows: int
    ids_served: int
    clocks: dict[str, Clock]
    resident_bytes: int
    row_payload_bytes: int
    table: str
    factorize_ids: int = 0
    factorize: Clock = field(default_factory=Clock)
    threads: int = 1


def _stream(batch: int, seed: int) -> Iterator[torch.Tensor]:
    log = ClickLog(fields=1, ids_per_field=1 << 34, zipf=1.1, seed=seed)
    start = 0
    while True:
        yield log.ids(torch.arange(start, start + batch)).flatten().unique()
        start += batch


def id_batches(rows_wanted: int, batch: int, seed: int) -> list[torch.Tensor]:
    """Unique ids per batch until their union reaches ``rows_wanted`` distinct ids."""
    batches: list[torch.Tensor] = []
    union = torch.empty(0, dtype=torch.int64)
    for ids in _stream(batch, seed):
        batches.append(ids)
        union = torch.cat([union, ids]).unique()
        if union.numel() >= rows_wanted:
            return batches
    raise AssertionError("unreachable")


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


def native_factorize(stream: list[torch.Tensor]) -> tuple[Clock, int]:
    """One-shot hash factorisation of the concatenated stream (id -> first-seen code)."""
    ids = pa.array(np.concatenate([b.numpy() for b in stream]))
    clock = Clock()
    with clock:
        encoded = ids.dictionary_encode()
    assert len(encoded) == len(ids)
    return clock, len(ids)


def run_lookup_bench(
    *,
    rows: int,
    batch: int,
    dim: int,
    slots: int,
    seed: int = 0,
    weak_dict: bool = True,
    fallback: bool = True,
    threads: int = 2,
) -> LookupResult:
    """Serve batches until the table holds ``rows`` rows, each batch by every contender in
    turn, so that all meet the same load on a shared host; wall and CPU time are both kept.

    ``clocks`` holds ``table`` (the compiled table on one thread where built, else the torch
    table), ``table_threads`` (the compiled table on ``threads`` threads), ``fallback`` (the
    torch table), ``strong`` and ``dict``.
    """
    compiled = native.available()
    tables: dict[str, DynamicTable | NativeTable] = {}
    if compiled:
        tables["table"] = NativeTable(dim=dim, slots=slots, seed=0, threads=1)
        tables["table_threads"] = NativeTable(dim=dim, slots=slots, seed=0, threads=threads)
        if fallback:
            tables["fallback"] = DynamicTable(dim=dim, slots=slots, seed=0)
    else:
        tables["table"] = DynamicTable(dim=dim, slots=slots, seed=0)
    strong = IndexedRows(dim, slots)
    store: dict[int, torch.Tensor] = {}
    clocks = {name: Clock() for name in [*tables, "strong", "dict"]}
    stream: list[torch.Tensor] = []
    main = tables["table"]
    for ids in _stream(batch, seed):
        stream.append(ids)
        for name, table in tables.items():
            with clocks[name]:
                table.embeddings(table.find_or_insert(ids), ids)
        with clocks["strong"]:
            strong.serve(ids)
        if weak_dict:
            with clocks["dict"]:
                _dict_serve(store, ids, dim, slots)
        if main.num_rows >= rows:
            break
    assert all(t.num_rows == main.num_rows for t in tables.values())
    assert len(strong.index) == main.num_rows
    factorize, factorized = native_factorize(stream)
    return LookupResult(
        rows=main.num_rows,
        ids_served=sum(b.numel() for b in stream),
        clocks=clocks,
        resident_bytes=main.resident_bytes,
        row_payload_bytes=main.row_payload_bytes,
        table="compiled" if compiled else "torch",
        factorize_ids=factorized,
        factorize=factorize,
        threads=threads,
    )
