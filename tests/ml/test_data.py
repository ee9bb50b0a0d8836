"""Datasets: references, bundled sets, the click log's ground truth, files, partitioning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from tessera_ml.comm.base import Communicator
from tessera_ml.comm.local import run_local
from tessera_ml.data import (
    ClickParams,
    DataRefError,
    Table,
    align_across,
    align_tables,
    make_clicks,
    parse_ref,
    resolve,
    split_columns,
)
from tessera_ml.data.partition import shard_rows
from tessera_ml.metrics import auc

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(
    ("ref", "task", "classes", "features"),
    [
        ("sklearn:digits", "classification", 10, 64),
        ("sklearn:breast_cancer", "binary", 2, 30),
        ("sklearn:wine", "classification", 3, 13),
        ("sklearn:diabetes", "regression", 1, 10),
    ],
)
def test_bundled_sets_have_a_fixed_disjoint_split(
    ref: str, task: str, classes: int, features: int
) -> None:
    first, again = resolve(ref), resolve(ref)
    assert (first.task, first.num_classes, first.num_features) == (task, classes, features)
    assert torch.equal(first.test.ids, again.test.ids)
    assert not set(first.train.ids.tolist()) & set(first.test.ids.tolist())
    assert len(first.train) + len(first.test) == len(set(first.train.ids.tolist())) + len(
        first.test
    )
    assert abs(float(first.train.x.mean())) < 0.05


def test_split_seed_changes_the_split() -> None:
    a = resolve("sklearn:wine")
    b = resolve("sklearn:wine?split_seed=7&test=0.3")
    assert not torch.equal(a.test.ids, b.test.ids)
    assert abs(len(b.test) / (len(b.train) + len(b.test)) - 0.3) < 0.1


def test_reference_errors_carry_a_code() -> None:
    for ref, code in [
        ("s3:bucket", "unknown_scheme"),
        ("sklearn:mnist", "unknown_dataset"),
        ("sklearn:digits?color=red", "unknown_option"),
        ("sklearn:digits?shard=3/2", "bad_shard"),
        ("file:data.xlsx", "unknown_format"),
    ]:
        with pytest.raises(DataRefError) as info:
            parse_ref(ref)
        assert info.value.code == code
    with pytest.raises(DataRefError, match="data root"):
        resolve("file:relative.csv")


def test_click_log_is_deterministic_zipf_and_its_oracle_bounds_a_fitted_model() -> None:
    params = ClickParams(rows=20_000, fields=4, ids_per_field=200, zipf=1.2, seed=3)
    data, again = make_clicks(params), make_clicks(params)
    assert torch.equal(data.train.x, again.train.x)
    counts = np.bincount(data.train.x[:, 0].numpy(), minlength=200)
    top = np.sort(counts)[::-1]
    assert top[0] > 5 * top[20] > 0  # heavy head of a Zipf law
    truth = data.meta["test_probability"]
    assert data.meta["oracle_auc"] == pytest.approx(
        roc_auc_score(data.test.y.numpy(), truth.numpy())
    )
    one_hot = np.zeros((len(data.train), 4 * 200), dtype=np.float32)
    one_hot[np.arange(len(data.train))[:, None], data.train.x.numpy() + np.arange(4) * 200] = 1
    test_hot = np.zeros((len(data.test), 4 * 200), dtype=np.float32)
    test_hot[np.arange(len(data.test))[:, None], data.test.x.numpy() + np.arange(4) * 200] = 1
    fitted = LogisticRegression(max_iter=300).fit(one_hot, data.train.y.numpy())
    fitted_auc = roc_auc_score(data.test.y.numpy(), fitted.decision_function(test_hot))
    assert 0.6 < fitted_auc < data.meta["oracle_auc"] + 0.01


def test_auc_matches_sklearn_with_ties() -> None:
    gen = torch.Generator().manual_seed(0)
    scores = torch.randint(0, 5, (500,), generator=gen).float()
    labels = (torch.rand(500, generator=gen) < 0.3).float()
    assert auc(scores, labels) == pytest.approx(roc_auc_score(labels.numpy(), scores.numpy()))


def test_csv_parquet_and_npz_files_load_with_labels_and_ids(tmp_path: Path) -> None:
    import pyarrow as pa
    from pyarrow import csv, parquet

    rng = np.random.default_rng(0)
    ids = rng.permutation(1000)[:200] + 10_000
    table = pa.table(
        {
            "id": ids,
            "a": rng.normal(size=200),
            "b": rng.normal(size=200),
            "label": rng.integers(0, 3, 200),
        }
    )
    csv.write_csv(table, tmp_path / "d.csv")
    parquet.write_table(table, tmp_path / "d.parquet")
    np.savez(tmp_path / "d.npz", x=np.stack([table["a"], table["b"]], 1), y=table["label"], ids=ids)
    loaded = [resolve(f"file:d.{s}", data_root=tmp_path) for s in ("csv", "parquet", "npz")]
    for data in loaded:
        assert data.task == "classification" and data.num_classes == 3
        assert data.num_features == 2
        assert len(data.train) + len(data.test) == 200
        assert torch.equal(data.test.ids, loaded[0].test.ids)
    assert loaded[0].columns == ("a", "b")
    held_out = resolve("file:d.csv?test=file:d.parquet", data_root=tmp_path)
    assert len(held_out.train) == len(held_out.test) == 200
    features_only = resolve(f"file:{tmp_path / 'd.csv'}?label=")
    assert features_only.train.y is None and features_only.num_features == 3


@pytest.mark.parametrize(
    ("rows", "code", "cause"),
    [
        ("id,a,label\nJane Roe (MRN 884213),1.0,0\n", "bad_ids", "Jane Roe"),
        ("id,a,label\n1,1.0,0\n2,Jane Roe,1\n", "non_numeric_columns", "['a']"),
        ("id,a,label\n1,1.0,0\n2,Jane Roe,1,extra\n", "unreadable_file", "Jane Roe"),
        ("id,a,label\n1,1.0,0\n1,2.0,1\n", "duplicate_ids", None),
    ],
)
def test_a_files_problem_is_named_without_its_values(
    tmp_path: Path, rows: str, code: str, cause: str | None
) -> None:
    """The message reaches every party of the job; what the reader said stays the cause, for
    the worker's own log."""
    (tmp_path / "rows.csv").write_text(rows)
    with pytest.raises(DataRefError) as refused:
        resolve("file:rows.csv", data_root=tmp_path)
    message = str(refused.value)
    assert refused.value.code == code and "rows.csv" in message
    assert "Jane" not in message and "'a'" not in message
    if cause is not None:
        assert cause in str(refused.value.__cause__)


def test_vertical_parties_agree_on_split_and_align_by_id(tmp_path: Path) -> None:
    import pyarrow as pa
    from pyarrow import csv

    rng = np.random.default_rng(1)
    ids = np.arange(300)
    left = rng.permutation(ids)[:250]
    right = rng.permutation(ids)[:260]
    csv.write_csv(pa.table({"id": left, "x": left * 2.0}), tmp_path / "left.csv")
    csv.write_csv(
        pa.table({"id": right, "z": right * 3.0, "label": right % 2}), tmp_path / "right.csv"
    )
    a = resolve("file:left.csv", data_root=tmp_path)
    b = resolve("file:right.csv", data_root=tmp_path)
    ta, tb = align_tables([a.train, b.train])
    assert torch.equal(ta.ids, tb.ids) and len(ta) > 150
    assert torch.equal(ta.x[:, 0] * 1.5, tb.x[:, 0])
    assert set(ta.ids.tolist()).isdisjoint(b.test.ids.tolist())


def test_horizontal_and_vertical_partitions_cover_the_data() -> None:
    data = resolve("sklearn:digits")
    shards = [shard_rows(data.train, i, 3) for i in range(3)]
    assert sorted(torch.cat([s.ids for s in shards]).tolist()) == data.train.ids.tolist()
    parts = split_columns(data, 3)
    assert sum(p.num_features for p in parts) == 64
    assert [p.train.y is not None for p in parts] == [False, False, True]
    assert torch.equal(torch.cat([p.train.x for p in parts], 1), data.train.x)
    via_ref = resolve("sklearn:digits?shard=1/3&columns=8:16")
    assert torch.equal(via_ref.train.x, shards[1].x[:, 8:16])


def _align(comm: Communicator, tables: list[Table]) -> list[int]:
    aligned = align_across(comm, tables[comm.rank], salt="job-7")
    return aligned.ids.tolist()


def test_parties_align_by_exchanging_id_digests() -> None:
    parties = [
        Table(torch.zeros(4, 1), None, torch.tensor([5, 1, 9, 3])),
        Table(torch.zeros(5, 2), torch.zeros(5), torch.tensor([3, 7, 9, 5, 2])),
        Table(torch.zeros(3, 1), None, torch.tensor([9, 5, 3])),
    ]
    orders = run_local(_align, 3, parties)
    assert orders[0] == orders[1] == orders[2]
    assert sorted(orders[0]) == [3, 5, 9]
