"""Lookup-or-insert throughput of the table against a Python dict of row tensors.

Both serve the same stream of batches (deduplicated Zipf ids over a large id space, so the table
keeps growing) and return the embeddings of each batch; the dict creates its new rows with the
same vectorised initialiser, so the comparison is about the lookup structure alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from tessera_ml.algorithms.param_server.clicklog import ClickLog
from tessera_ml.algorithms.param_server.hashing import init_rows
from tessera_ml.algorithms.param_server.table import DynamicTable


@dataclass
class LookupResult:
    rows: int
    ids_served: int
    table_seconds: float
    dict_seconds: float
    resident_bytes: int
    row_payload_bytes: int


def id_batches(rows_wanted: int, batch: int, seed: int) -> list[torch.Tensor]:
    """Unique ids per batch until their union reaches ``rows_wanted`` distinct ids."""
    log = ClickLog(num_fields=1, vocab=1 << 34, zipf_a=1.1, seed=seed)
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


def run_lookup_bench(*, rows: int, batch: int, dim: int, slots: int, seed: int = 0) -> LookupResult:
    batches = id_batches(rows, batch, seed)
    table = DynamicTable(dim=dim, slots=slots, seed=0)
    t0 = time.perf_counter()
    for ids in batches:
        table.embeddings(table.find_or_insert(ids), ids)
    table_seconds = time.perf_counter() - t0
    store: dict[int, torch.Tensor] = {}
    t0 = time.perf_counter()
    for ids in batches:
        _dict_serve(store, ids, dim, slots)
    dict_seconds = time.perf_counter() - t0
    assert len(store) == table.num_rows
    return LookupResult(
        rows=table.num_rows,
        ids_served=sum(b.numel() for b in batches),
        table_seconds=table_seconds,
        dict_seconds=dict_seconds,
        resident_bytes=table.resident_bytes,
        row_payload_bytes=table.row_payload_bytes,
    )
