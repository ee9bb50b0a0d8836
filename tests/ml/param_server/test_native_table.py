"""The compiled table against the torch table: same rows, same exports, same bookkeeping."""

from __future__ import annotations

import torch

from tessera_ml.algorithms.param_server import native
from tessera_ml.algorithms.param_server.native import NativeTable
from tessera_ml.algorithms.param_server.optim import SparseAdagrad
from tessera_ml.algorithms.param_server.table import DynamicTable, TableExport
from tessera_ml.algorithms.param_server.tables import EmbeddingTable, make_table

DIM = 8
SLOTS = DIM + 2  # Adagrad's state, then the eviction bookkeeping (last step, uses)


def _serve(
    table: EmbeddingTable, candidates: EmbeddingTable, ids: torch.Tensor, step: int, admit: int
) -> torch.Tensor:
    """What a server does with one PULL and its PUSH: admission, bookkeeping, an update."""
    rows = table.find(ids)
    missing = (rows < 0).nonzero().squeeze(1)
    counts = candidates.count(candidates.find_or_insert(ids[missing]))
    admitted = missing[counts >= admit]
    rows[admitted] = table.find_or_insert(ids[admitted])
    live = rows[rows >= 0]
    table.touch(live, step)
    grads = torch.sin(ids[rows >= 0].double()).float().unsqueeze(1).expand(-1, DIM) * 0.1
    values = table.read(live)
    values[:, :-2] = SparseAdagrad(0.05).update(values[:, :-2].clone(), grads)
    table.write(live, values)
    return table.embeddings(rows, ids)


def _evict_idle(table: EmbeddingTable, step: int, ttl: int) -> int:
    saved = table.export()
    return table.keep((step - saved.state[:, -2]) <= ttl)


def _same(a: TableExport, b: TableExport) -> bool:
    return all(
        torch.equal(x, y) for x, y in [(a.ids, b.ids), (a.params, b.params), (a.state, b.state)]
    )


def test_the_compiled_table_is_built() -> None:
    assert native.available(), native.UNAVAILABLE
    table, line = make_table(dim=4, slots=0, seed=0)
    assert isinstance(table, NativeTable) and "compiled" in line
    fallback, line = make_table(dim=4, slots=0, seed=0, prefer="torch")
    assert isinstance(fallback, DynamicTable) and "torch" in line


def test_both_tables_export_the_same_rows_over_a_million_ids() -> None:
    """1M ids in 20 batches (Zipf-like repeats, ids over the whole int64 range), admission on
    the second sighting, idle rows evicted every 5 batches: every PULL and the final export
    agree bit for bit, with the compiled table on one thread and on two."""
    generator = torch.Generator().manual_seed(5)
    tables: dict[str, tuple[EmbeddingTable, EmbeddingTable]] = {
        "torch": (DynamicTable(dim=DIM, slots=SLOTS, seed=9), DynamicTable(dim=1, slots=0, seed=0)),
        "one": (
            NativeTable(dim=DIM, slots=SLOTS, seed=9, threads=1, block_rows=4096),
            NativeTable(dim=1, slots=0, seed=0, threads=1),
        ),
        "two": (
            NativeTable(dim=DIM, slots=SLOTS, seed=9, threads=2, min_capacity=4),
            NativeTable(dim=1, slots=0, seed=0, threads=2),
        ),
    }
    evicted = dict.fromkeys(tables, 0)
    for step in range(20):
        ranks = (torch.rand(50_000, generator=generator) ** 3 * 400_000).long()
        ids = (ranks * -7046029254386353131 + step % 3).unique()
        served = {name: _serve(t, c, ids, step, admit=2) for name, (t, c) in tables.items()}
        assert torch.equal(served["torch"], served["one"]) and torch.equal(
            served["one"], served["two"]
        )
        if step % 5 == 4:
            evicted = {
                name: evicted[name] + _evict_idle(t, step, 3) for name, (t, _) in tables.items()
            }
    exports = {name: t.export() for name, (t, _) in tables.items()}
    assert _same(exports["torch"], exports["one"]) and _same(exports["one"], exports["two"])
    assert evicted["torch"] == evicted["one"] == evicted["two"] > 0
    assert 50_000 < exports["one"].ids.numel() < 1_000_000
    assert exports["one"].ids.unique().numel() == exports["one"].ids.numel()


def test_absent_ids_read_their_initial_value_without_a_row() -> None:
    table = NativeTable(dim=5, slots=3, seed=2)
    reference = DynamicTable(dim=5, slots=3, seed=2)
    ids = torch.tensor([-(2**63), 0, 7, 2**63 - 1])
    table.find_or_insert(ids[:2])
    rows = table.find(ids)
    assert rows.tolist()[:2] == [0, 1] and rows.tolist()[2:] == [-1, -1]
    assert table.num_rows == 2
    assert torch.equal(table.embeddings(rows, ids), reference.embeddings(reference.find(ids), ids))


def test_storage_grows_by_blocks_and_the_index_stays_small() -> None:
    table = NativeTable(dim=16, slots=16, seed=0, block_rows=1024, min_capacity=4)
    for start in range(0, 60_000, 6_000):
        table.find_or_insert(torch.arange(start, start + 6_000) * 1_000_003)
    assert len(table.rows.blocks) == -(-60_000 // 1024)
    assert 0.5 * table.capacity < table.num_rows <= 0.75 * table.capacity
    per_row = table.resident_bytes / table.num_rows
    assert 0 < per_row - table.row_payload_bytes <= 32


def test_load_restores_an_export_and_rows_keep_their_order() -> None:
    table = NativeTable(dim=4, slots=5, seed=3, block_rows=64)
    ids = torch.randint(-(2**40), 2**40, (3000,), generator=torch.Generator().manual_seed(1))
    ids = ids.unique()[torch.randperm(ids.unique().numel())]
    rows = table.find_or_insert(ids)
    assert torch.equal(rows, torch.arange(ids.numel()))
    values = table.read(rows)
    values[:, 4:] = torch.rand(values.shape[0], 5)
    table.write(rows, values)
    saved = table.export()
    assert torch.equal(saved.ids, ids)
    restored = NativeTable(dim=4, slots=5, seed=3)
    restored.load(saved)
    assert _same(restored.export(), saved)
    assert torch.equal(restored.read(restored.find(ids)), values)
