"""Where hier_sync lends its work to the harness, on the shared world (see conftest): every
reduction its helper threads make runs inside ``harness.work``, and the main thread lets the
time catch up as each bucket's gradients are ready, so a paced device is slower in all its
threads and hands a bucket on only when the slower device would have."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import torch
from torch import nn

from tessera_ml.algorithms.hier_sync.flat import FlatParams
from tessera_ml.algorithms.hier_sync.sync import HierSync
from tessera_ml.algorithms.hier_sync.topology import Topology
from tessera_ml.comm.base import Communicator
from tessera_ml.harness import Harness

TOPOLOGY = Topology(((0, 1), (2, 3)))


class Recording(Harness):
    """Notes which thread enters ``work`` and calls ``catch_up``, and what had happened by then."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []
        self.reduced = 0
        self._lock = threading.Lock()

    def _note(self, kind: str) -> None:
        with self._lock:
            self.calls.append((threading.current_thread().name, kind, self.reduced))

    @contextmanager
    def _work(self) -> Iterator[None]:
        self._note("work")
        yield
        with self._lock:
            self.reduced += threading.current_thread() is not threading.main_thread()

    def work(self) -> AbstractContextManager[None]:
        return self._work()

    def catch_up(self) -> None:
        self._note("catch_up")


def run_hooks(comm: Communicator) -> dict[str, Any]:
    """Runs on every rank of the shared world: one step of two buckets under ``Recording``."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    flat = FlatParams(model, bucket_bytes=4 * 16 * 4)
    harness = Recording()
    sync = HierSync(
        comm,
        TOPOLOGY,
        flat,
        [0.5, 0.5],
        lambda params: torch.optim.SGD(params, lr=0.1),
        harness=harness,
    )
    try:
        sync.start_fresh()
        sync.begin_step()
        x = torch.randn(5, 8, generator=torch.Generator().manual_seed(comm.rank))
        with harness.work():
            model(x).square().mean().backward()
        sync.finish_gradients()
        sync.apply()
    finally:
        sync.close()
    main = threading.main_thread().name
    return {
        "buckets": len(flat.buckets),
        "main": [(kind, reduced) for name, kind, reduced in harness.calls if name == main],
        "helpers": sorted({name for name, kind, _ in harness.calls if name != main}),
        "helper_work": sum(1 for name, kind, _ in harness.calls if name != main),
    }


def test_helper_reductions_are_device_work_and_buckets_wait_for_the_time_to_catch_up(
    world: dict[str, Any],
) -> None:
    for out in world["hooks"]:
        buckets = out["buckets"]
        assert buckets == 2
        # the main thread: its backward block, then one catch-up per bucket, the first before
        # the helpers have reduced anything (they start a bucket only once it is ready)
        assert out["main"][0] == ("work", 0)
        catch_ups = [reduced for kind, reduced in out["main"] if kind == "catch_up"]
        assert len(catch_ups) == buckets
        assert catch_ups[0] == 0
        # both helper threads paced: inside the node and across nodes, once per bucket each
        assert len(out["helpers"]) == 2
        assert out["helper_work"] == 2 * buckets
