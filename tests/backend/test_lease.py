"""The scheduler lease on SQLite and on PostgreSQL: one holder at a time, taken over once lapsed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tessera_api.db import make_engine
from tessera_api.scheduling.lease import Lease


@pytest.fixture
def sessions(db_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(db_url)
    yield sessionmaker(engine, expire_on_commit=False)
    engine.dispose()


def test_one_holder_at_a_time_until_it_lapses(sessions: sessionmaker[Session]) -> None:
    # long enough that a loaded machine does not let it lapse between two calls
    first = Lease(sessions, ttl_s=2.0, holder="first")
    second = Lease(sessions, ttl_s=2.0, holder="second")

    assert first.hold()
    assert not second.hold()
    assert first.hold()  # renewed
    assert first.current_holder() == "first"

    time.sleep(2.1)  # the first stops renewing: it died or hung
    assert second.hold()
    assert not first.hold()  # and it knows it is no longer the holder
    assert second.current_holder() == "second"


def test_a_holder_that_stops_cleanly_hands_over_at_once(sessions: sessionmaker[Session]) -> None:
    first = Lease(sessions, ttl_s=60, holder="first")
    second = Lease(sessions, ttl_s=60, holder="second")
    assert first.hold()
    assert not second.hold()

    first.release()
    assert first.current_holder() is None
    assert second.hold()
    second.release()
    second.release()  # releasing what one does not hold changes nothing
    assert first.hold()


def test_replicas_racing_for_a_new_lease_get_one_holder(sessions: sessionmaker[Session]) -> None:
    leases = [Lease(sessions, ttl_s=60, holder=f"replica-{i}") for i in range(6)]
    won: list[str] = []
    start = threading.Barrier(len(leases))

    def race(lease: Lease) -> None:
        start.wait()
        if lease.hold():
            won.append(lease.holder)

    threads = [threading.Thread(target=race, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    assert leases[0].current_holder() == won[0]
