"""The lookup benchmark's baselines serve what the table serves."""

from __future__ import annotations

import torch

from tessera_ml.algorithms.param_server.table import DynamicTable
from tessera_ml.bench.param_server.lookup_bench import IndexedRows, id_batches, run_lookup_bench


def test_the_strong_baseline_serves_the_tables_rows_as_it_grows() -> None:
    table, strong = DynamicTable(dim=4, slots=4, seed=0), IndexedRows(dim=4, slots=4)
    batches = id_batches(5000, 512, seed=1)
    assert len(batches) > 2  # the stream keeps bringing new ids, so both grow past 1024 rows
    for ids in batches:
        expected = table.embeddings(table.find_or_insert(ids), ids)
        assert torch.equal(strong.serve(ids), expected)
    assert len(strong.index) == table.num_rows > 1024


def test_the_bench_times_every_contender_on_the_same_ids() -> None:
    result = run_lookup_bench(rows=3000, batch=512, dim=4, slots=4)
    assert result.rows >= 3000 and result.table == "compiled"
    assert set(result.clocks) == {"table", "table_threads", "fallback", "strong", "dict"}
    assert min(c.wall for c in result.clocks.values()) > 0
    assert result.clocks["strong"].cpu > 0 and result.ids_served > result.rows
    assert result.factorize_ids == result.ids_served and result.factorize.cpu > 0
