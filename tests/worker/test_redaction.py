"""Text that leaves a worker for the control plane names no folder of its host."""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tessera_worker.redaction import HostPaths


def _traceback_of(call: Callable[[], object]) -> str:
    try:
        call()
    except Exception:
        return traceback.format_exc()
    raise AssertionError("the call did not raise")


def test_a_traceback_names_files_by_their_module_path() -> None:
    linear = torch.nn.Linear(2, 2)
    text = _traceback_of(lambda: linear(torch.zeros(3)))
    text += _traceback_of(lambda: json.loads("{"))
    assert str(Path(torch.__file__).parent) in text and "json" in text

    shown = HostPaths().hide(text)

    assert 'File "torch/nn/modules/linear.py"' in shown
    assert 'File "json/decoder.py"' in shown
    for folder in (sys.prefix, sys.base_prefix, str(Path.home())):
        assert folder not in shown
    assert shown.splitlines()[-1] == text.splitlines()[-1]  # the error itself is kept


def test_the_workers_home_and_the_users_home_get_names(tmp_path: Path) -> None:
    home = tmp_path / "tessera"
    hidden = HostPaths(home)
    assert hidden.hide(f"dataset {home}/data/rows.csv") == "dataset $TESSERA_HOME/data/rows.csv"
    assert hidden.hide(f"home is {home}.") == "home is $TESSERA_HOME."
    assert hidden.hide(f"{Path.home()}/notes.txt") == "~/notes.txt"
    assert hidden.hide(f"{sys.prefix}/pyvenv.cfg") == "<python>/pyvenv.cfg"


def test_a_longer_name_that_only_starts_like_a_folder_is_left(tmp_path: Path) -> None:
    home = tmp_path / "tessera"
    assert "$TESSERA_HOME" not in HostPaths(home).hide(f"{home}-old/x {home}2 {home}.bak")


def test_a_folder_is_hidden_where_a_path_starts_not_inside_another() -> None:
    """A home of ``/data`` (the container's) leaves ``/mnt/data`` and a package's ``…/data/``
    as they are."""
    hidden = HostPaths(Path("/data"))
    assert hidden.hide("read /data/x.csv") == "read $TESSERA_HOME/x.csv"
    assert hidden.hide('File "/data/x.py"') == 'File "$TESSERA_HOME/x.py"'
    assert hidden.hide("/mnt/data/x.csv") == "/mnt/data/x.csv"
    assert hidden.hide("site/torch/utils/data/loader.py") == "site/torch/utils/data/loader.py"


@pytest.mark.parametrize("text", ["loss 0.5 at step 10", "1/2 of the rows", "/"])
def test_text_without_host_folders_is_unchanged(text: str) -> None:
    assert HostPaths(Path("/srv/tessera")).hide(text) == text
