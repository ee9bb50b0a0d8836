"""Workers of several parties started at once on the zero-setup broker all come up and stay up."""

from __future__ import annotations

from pathlib import Path

from tessera_ml.worlds import free_port
from tessera_worker.broker import EMBEDDED
from tests.e2e.deployment import Deployment

PARTIES = ("alice", "bob", "carol", "dave")


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

        assert all(p.poll() is None for p in running.workers.values()), running.logs()
        # each worker binds only its own queues: no exchange file is written by all of them
        exchanges = sorted(f.name for f in (tmp_path / "broker" / "control").iterdir())
        assert exchanges, "the workers bound no queue on the embedded broker"
        assert all(name.startswith("party.") for name in exchanges), exchanges
        for party in PARTIES:
            own = [n for n in exchanges if n.startswith(f"party.{party}.")]
            assert len(own) == 2, (party, exchanges)  # its party's queue and its own
    finally:
        running.stop()
