"""The dynamic table: vectorised lookup-or-insert, block storage, deterministic rows, export."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera_ml.algorithms.param_server.hashing import init_rows, shard_of
from tessera_ml.algorithms.param_server.table import DynamicTable

id_batches = st.lists(
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=1, max_size=60),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None)
@given(id_batches)
def test_lookup_or_insert_agrees_with_a_dict(batches: list[list[int]]) -> None:
    table = DynamicTable(dim=3, slots=0, seed=1, block_rows=64, min_capacity=2)
    reference: dict[int, int] = {}
    for batch in batches:
        ids = torch.tensor(sorted(set(batch)), dtype=torch.int64)
        rows = table.find_or_insert(ids).tolist()
        for i, r in zip(ids.tolist(), rows, strict=True):
            assert reference.setdefault(i, r) == r
        assert table.num_rows == len(reference)
    assert sorted(reference.values()) == list(range(len(reference)))


def test_absent_ids_are_reported_not_created() -> None:
    table = DynamicTable(dim=4, slots=4, seed=0)
    table.find_or_insert(torch.tensor([10, 20, 30]))
    rows = table.find(torch.tensor([20, 40]))
    assert rows[0] >= 0 and rows[1] == -1
    assert table.num_rows == 3
    emb = table.embeddings(rows, torch.tensor([20, 40]))
    assert torch.equal(emb[1], init_rows(torch.tensor([40]), 4, 0, table.init_scale)[0])


def test_rows_grow_in_blocks_without_moving_existing_rows() -> None:
    table = DynamicTable(dim=2, slots=1, seed=0, block_rows=128, min_capacity=4)
    table.find_or_insert(torch.arange(100) * 17)
    first_block = table.rows.blocks[0].data_ptr()
    before = table.embeddings(table.find(torch.arange(100) * 17), torch.arange(100) * 17)
    table.find_or_insert(torch.arange(100, 5000) * 17)
    assert len(table.rows.blocks) == -(-5000 // 128)
    assert table.rows.blocks[0].data_ptr() == first_block
    assert table.index.numel() >= 5000 / 0.5
    rows = table.find(torch.arange(5000) * 17)
    assert sorted(rows.tolist()) == list(range(5000))
    assert torch.equal(table.embeddings(rows[:100], torch.arange(100) * 17), before)


def test_new_rows_depend_only_on_id_and_seed() -> None:
    ids = torch.tensor([5, 1 << 50, -3, 77])
    a = DynamicTable(dim=8, slots=0, seed=7)
    b = DynamicTable(dim=8, slots=0, seed=7)
    a.find_or_insert(ids)
    b.find_or_insert(torch.tensor([99, 123]))
    b.find_or_insert(ids.flip(0))
    ea = a.embeddings(a.find(ids), ids)
    assert torch.equal(ea, b.embeddings(b.find(ids), ids))
    other = DynamicTable(dim=8, slots=0, seed=8)
    assert not torch.equal(ea, other.embeddings(other.find_or_insert(ids), ids))
    assert float(ea.abs().max()) <= a.init_scale


def test_export_has_exactly_the_rows_held_and_load_restores_them() -> None:
    table = DynamicTable(dim=4, slots=5, seed=3, block_rows=64)
    ids = torch.randint(-(2**40), 2**40, (1000,)).unique()
    rows = table.find_or_insert(ids)
    values = table.read(rows)
    values[:, 4:] = torch.rand(values.shape[0], 5)
    table.write(rows, values)
    saved = table.export()
    assert saved.ids.shape == (ids.numel(),)
    assert saved.params.shape == (ids.numel(), 4) and saved.state.shape == (ids.numel(), 5)
    assert saved.params.untyped_storage().nbytes() == ids.numel() * 4 * 4
    restored = DynamicTable(dim=4, slots=5, seed=3, block_rows=64)
    restored.load(saved)
    again = restored.export()
    for a, b in [(saved.ids, again.ids), (saved.params, again.params), (saved.state, again.state)]:
        assert torch.equal(a, b)
    assert torch.equal(restored.read(restored.find(ids)), table.read(rows))


def test_keep_drops_rows_and_the_rest_stay_reachable() -> None:
    table = DynamicTable(dim=2, slots=0, seed=0, block_rows=64)
    ids = torch.arange(300)
    table.find_or_insert(ids)
    before = table.embeddings(table.find(ids), ids)
    saved = table.export()
    dropped = table.keep(saved.ids % 3 != 0)
    assert dropped == 100 and table.num_rows == 200
    rows = table.find(ids)
    assert bool((rows[ids % 3 == 0] == -1).all()) and bool((rows[ids % 3 != 0] >= 0).all())
    live = ids % 3 != 0
    assert torch.equal(table.embeddings(rows[live], ids[live]), before[live])


def test_resident_memory_is_the_payload_plus_a_small_index() -> None:
    table = DynamicTable(dim=16, slots=16, seed=0, block_rows=1024)
    for start in range(0, 60_000, 6_000):
        table.find_or_insert(torch.arange(start, start + 6_000) * 1_000_003)
    per_row = table.resident_bytes / table.num_rows
    assert table.row_payload_bytes == 128
    assert 0 < per_row - table.row_payload_bytes <= 32


def test_shards_split_ids_evenly() -> None:
    ids = torch.arange(40_000) * 64
    counts = torch.bincount(shard_of(ids, 4), minlength=4)
    assert int(counts.min()) > 9_000 and int(counts.max()) < 11_000
    assert torch.equal(shard_of(ids, 4), shard_of(ids.clone(), 4))
