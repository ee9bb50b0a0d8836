"""Workers of several parties started at once on the zero-setup broker all come up and stay up."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tessera_ml.worlds import free_port
from tessera_worker.broker import EMBEDDED
from tests.e2e.deployment import Deployment

pytestmark = pytest.mark.serial

PARTIES = ("alice", "bob", "carol", "dave")
BIND_WAIT_S = 60.0


def _bound_exchanges(control: Path, timeout_s: float) -> list[str]:
    """The exchange files in the broker's control folder, once every party's worker has bound
    its two queues or ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        names = sorted(f.name for f in control.iterdir()) if control.is_dir() else []
        bound = all(sum(n.startswith(f"party.{party}.") for n in names) >= 2 for party in PARTIES)
        if bound or time.monotonic() >= deadline:
            return names
        time.sleep(0.2)


def test_workers_started_at_once_share_the_embedded_broker_without_a_common_file(
    tmp_path: Path,
) -> None:
    running = Deployment(tmp_path, free_port(), f"sqlite:///{tmp_path / 'tessera.db'}", EMBEDDED)
    try:
        running.start_api()
        running.wait_serving()
        for party in PARTIES:
            running.add_party(party)
        for party in PARTIES:
            running.start_worker(party)
        running.wait_online(*PARTIES)
        # a worker reports online before its consumer has bound its queues: wait for those
        exchanges = _bound_exchanges(tmp_path / "broker" / "control", BIND_WAIT_S)

        assert all(p.poll() is None for p in running.workers.values()), running.logs()
        # each worker binds only its own queues: no exchange file is written by all of them
        assert all(name.startswith("party.") for name in exchanges), exchanges
        for party in PARTIES:
            own = [n for n in exchanges if n.startswith(f"party.{party}.")]
            assert len(own) == 2, (party, exchanges, running.logs())  # its party's and its own
    finally:
        running.stop()
