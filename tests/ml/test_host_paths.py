"""Files a job's configuration names on a party's host stay inside the worker's folders."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tessera_ml.algorithms.zo_pair.model import load_weights
from tessera_ml.context import RankContext
from tessera_ml.data import DataRefError, resolve
from tessera_ml.errors import CodedError
from tessera_ml.host_paths import host_path
from tessera_ml.safe_load import load_state
from tests.ml.planted import Touch

ROWS = "a,b,label\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(20))


def test_without_roots_a_path_is_taken_as_given_and_a_relative_one_refused() -> None:
    assert host_path("/any/where.csv", [], "dataset file") == Path("/any/where.csv")
    with pytest.raises(CodedError) as refused:
        host_path("rows.csv", [], "dataset file")
    assert refused.value.code == "no_data_root"


def test_with_roots_a_path_must_lie_inside_one_of_them(tmp_path: Path) -> None:
    data, weights = tmp_path / "data", tmp_path / "checkpoints"
    roots = [data, weights]
    assert host_path("rows.csv", roots, "f") == data / "rows.csv"
    assert host_path(str(weights / "j" / "step-1"), roots, "f") == weights / "j" / "step-1"
    for outside in ("/etc/passwd.csv", str(tmp_path / "elsewhere.csv"), str(tmp_path)):
        with pytest.raises(CodedError) as refused:
            host_path(outside, roots, "dataset file")
        assert refused.value.code == "path_outside_root"
    # a parent folder is refused by name, even where it would come back inside
    for climbing in ("../data/rows.csv", f"{data}/../data/rows.csv", "sub/../../x.csv"):
        with pytest.raises(CodedError) as refused:
            host_path(climbing, roots, "dataset file")
        assert refused.value.code == "path_outside_root"


def test_a_link_the_operator_put_inside_the_data_folder_is_followed(tmp_path: Path) -> None:
    shared = tmp_path / "mounted"
    shared.mkdir()
    (shared / "rows.csv").write_text(ROWS)
    data = tmp_path / "data"
    data.mkdir()
    (data / "mounted").symlink_to(shared)
    loaded = resolve("file:mounted/rows.csv?label=label", data_root=data)
    assert len(loaded.train) + len(loaded.test) == 20


def test_a_dataset_outside_the_data_root_is_refused_with_a_code(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "rows.csv").write_text(ROWS)
    (tmp_path / "private.csv").write_text(ROWS)
    inside = resolve(f"file:{data / 'rows.csv'}", data_root=data)
    assert inside.columns == ("a", "b")
    for ref in (f"file:{tmp_path / 'private.csv'}", "file:rows.csv?test=file:../private.csv"):
        with pytest.raises(DataRefError) as refused:
            resolve(ref, data_root=data)
        assert refused.value.code == "path_outside_root"


def test_a_missing_dataset_is_named_by_its_file_name(tmp_path: Path) -> None:
    """The reason reaches every party of the job, so it names no folder of this host."""
    data = tmp_path / "data"
    data.mkdir()
    with pytest.raises(DataRefError) as missing:
        resolve("file:gone.csv", data_root=data)
    assert missing.value.code == "no_such_file"
    assert "'gone.csv'" in str(missing.value) and str(tmp_path) not in str(missing.value)


def test_a_state_file_holding_an_object_is_refused_and_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    planted = tmp_path / "rank-0.pt"
    torch.save({"model": {"w": torch.zeros(2)}, "extra": Touch(marker)}, planted)
    with pytest.raises(CodedError) as refused:
        load_state(planted, torch.device("cpu"), "the state")
    assert refused.value.code == "unsafe_checkpoint"
    assert "Unsupported global" in refused.value.reason
    assert not marker.exists()

    ctx = RankContext.__new__(RankContext)
    ctx.resume_from, ctx.rank, ctx.device = tmp_path, 0, torch.device("cpu")
    with pytest.raises(CodedError, match="holds objects other than tensors"):
        ctx.load_checkpoint()
    with pytest.raises(CodedError, match="holds objects other than tensors"):
        load_weights(torch.nn.Linear(1, 2), str(tmp_path), torch.device("cpu"))
    assert not marker.exists()


def test_weights_load_from_the_checkpoints_folder_and_nowhere_else(tmp_path: Path) -> None:
    data, checkpoints = tmp_path / "data", tmp_path / "checkpoints"
    model = torch.nn.Linear(2, 3)
    step = checkpoints / "earlier-job" / "step-000000010"
    step.mkdir(parents=True)
    torch.save({"model": model.state_dict(), "step": 10, "rng": [1, 2.0, "x"]}, step / "rank-0.pt")
    (tmp_path / "elsewhere").mkdir()
    torch.save(model.state_dict(), tmp_path / "elsewhere" / "w.pt")

    fresh = torch.nn.Linear(2, 3)
    load_weights(fresh, str(step), torch.device("cpu"), [data, checkpoints])
    assert torch.equal(fresh.weight, model.weight)
    with pytest.raises(CodedError) as refused:
        load_weights(fresh, str(tmp_path / "elsewhere" / "w.pt"), torch.device("cpu"), [data])
    assert refused.value.code == "path_outside_root"


def test_a_ranks_file_roots_are_its_data_folder_and_the_folder_of_all_checkpoints(
    tmp_path: Path,
) -> None:
    ctx = RankContext.__new__(RankContext)
    ctx.data_root, ctx.checkpoint_dir = None, tmp_path / "checkpoints" / "job-1"
    assert ctx.file_roots == []  # outside a worker: paths are taken as given
    ctx.data_root = tmp_path / "data"
    assert ctx.file_roots == [tmp_path / "data", tmp_path / "checkpoints"]
    ctx.checkpoint_dir = None
    assert ctx.file_roots == [tmp_path / "data"]
