"""A node's devices over shared memory, on the shared world (see conftest): the four ranks as
one node of four devices on this host, against the rings on the same data."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tessera_ml.algorithms.hier_sync import ring
from tessera_ml.algorithms.hier_sync.flat import FlatParams
from tessera_ml.algorithms.hier_sync.shared_node import SharedNode
from tessera_ml.comm.base import Communicator

RANKS = [0, 1, 2, 3]
BOUNDS = [0, 40, 40, 100, 135]  # device 1 owns an empty piece


def model(rank: int) -> nn.Module:
    torch.manual_seed(rank)
    return nn.Sequential(nn.Linear(8, 11), nn.Linear(11, 3))  # 135 parameters


def gradient(rank: int) -> torch.Tensor:
    return torch.randn(BOUNDS[-1], generator=torch.Generator().manual_seed(100 + rank))


def inside(view: torch.Tensor, buffer: torch.Tensor) -> bool:
    start = buffer.data_ptr()
    return start <= view.data_ptr() < start + buffer.numel() * buffer.element_size()


def run_shared(comm: Communicator, directory: str) -> dict[str, Any]:
    """Runs on every rank of the shared world (see conftest)."""
    position = RANKS.index(comm.rank)
    own = (BOUNDS[position], BOUNDS[position + 1])

    apart = FlatParams(model(comm.rank), bucket_bytes=1 << 20)
    before = (apart.param.data_ptr(), apart.grad.data_ptr())
    private = Path(tempfile.mkdtemp(prefix="tessera-apart-"))  # no peer sees these files
    alone = SharedNode.connect(comm, RANKS, apart, [own], directory=private)
    apart_untouched = (apart.param.data_ptr(), apart.grad.data_ptr()) == before
    private.rmdir()

    flat = FlatParams(model(comm.rank), bucket_bytes=1 << 20)
    initial = flat.param.clone()
    node = SharedNode.connect(comm, RANKS, flat, [own], directory=Path(directory))
    assert node is not None
    views = all(
        p.grad is not None and inside(p, flat.param) and inside(p.grad, flat.grad)
        for p in flat.params
    )
    node.barrier()  # every device has brought its piece and removed its files
    left_behind = os.listdir(directory)
    assembled = flat.param.clone()

    expected = gradient(comm.rank)
    ring.reduce_scatter(comm, RANKS, expected, BOUNDS)
    flat.grad.copy_(gradient(comm.rank))
    node.reduce_scatter(BOUNDS)
    reduced_equal = torch.equal(flat.grad[own[0] : own[1]], expected[own[0] : own[1]])

    node.barrier()  # every device has read its peers' pieces before anyone writes again
    with torch.no_grad():
        flat.param[own[0] : own[1]] = float(comm.rank)
    node.barrier()
    return {
        "alone": alone is None,
        "apart_untouched": apart_untouched,
        "left_behind": left_behind,
        "views": views,
        "own_initial": initial[own[0] : own[1]].tolist(),
        "assembled": assembled.tolist(),
        "reduced_equal": reduced_equal,
        "gathered": flat.param.tolist(),
    }


def test_devices_on_one_host_share_their_buffers_and_sum_as_the_ring_does(
    world: dict[str, Any],
) -> None:
    results = world["shared"]
    owners = [d for d in range(len(RANKS)) for _ in range(BOUNDS[d], BOUNDS[d + 1])]
    brought = [results[d]["own_initial"] for d in range(len(RANKS))]
    initial = [value for piece in brought for value in piece]
    for out in results:
        assert out["left_behind"] == []
        assert out["views"]
        # each device's piece of the common parameters comes from that device
        assert out["assembled"] == initial
        assert out["reduced_equal"]
        assert out["gathered"] == [float(owner) for owner in owners]
    assert initial != FlatParams(model(0), 1 << 20).param.tolist()  # the devices differ


def test_devices_that_see_no_common_files_keep_their_own_buffers(
    world: dict[str, Any],
) -> None:
    for out in world["shared"]:
        assert out["alone"]
        assert out["apart_untouched"]


def test_a_directory_without_room_for_a_buffer_refuses_it_up_front(tmp_path: Path) -> None:
    # a process that may not write files over 1 MiB stands for a full /dev/shm: the space is
    # reserved when the file is made, so the node keeps its rings instead of dying on a page
    script = textwrap.dedent(
        """
        import resource, signal, sys
        from pathlib import Path
        from tessera_ml.algorithms.hier_sync.shared_node import _create
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        print(_create(Path(sys.argv[1]), 4 << 20), _create(Path(sys.argv[1]), 1 << 19))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, check=True
    )
    too_big, fits = run.stdout.split()
    assert too_big == "None"
    assert [p.name for p in tmp_path.iterdir()] == [fits]
    made = (tmp_path / fits).stat()
    assert made.st_size == 1 << 19
    assert made.st_blocks * 512 >= 1 << 19  # its pages are taken now, not on first touch
