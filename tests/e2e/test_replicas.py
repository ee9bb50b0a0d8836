"""Two replicas of the control plane on one PostgreSQL: one schedules, the other takes over."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tessera_api.db import scratch_postgres
from tessera_ml.worlds import free_port
from tests.e2e.deployment import Deployment
from tests.e2e.platform import why

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.serial]

PARTIES = ["east", "west"]
LEASE_S = 10.0  # the default of ``scheduler_lease_s``


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    with scratch_postgres(postgres_url, prefix="tessera_replicas") as url:
        yield url


def lease_holder_pid(database_url: str) -> int | None:
    with psycopg.connect(database_url.replace("+psycopg", "")) as conn:
        row = conn.execute(
            "SELECT holder FROM leases WHERE name = 'scheduler' AND expires_at > now()"
        ).fetchone()
    return None if row is None or row[0] is None else int(row[0].split(":")[1])


def test_when_the_scheduling_replica_dies_the_other_takes_over(
    database: str, redis_url: str, tmp_path: Path
) -> None:
    # the first replica schedules; workers and clients talk to the second one
    deployment = Deployment(tmp_path, free_port(), database, redis_url)
    first = deployment.start_replica(free_port())
    try:
        deployment.wait_serving(port=next(iter(deployment.replicas)))
        deployment.start_api()
        deployment.wait_serving()
        assert deployment.api is not None
        assert lease_holder_pid(database) == first.pid
        for party in PARTIES:
            deployment.add_party(party)
            deployment.start_worker(party)
        deployment.wait_online(*PARTIES)

        steps, every = 6000, 200
        running = deployment.create_job(PARTIES, steps=steps, log_interval=every)
        deployment.wait_job(running, lambda j: j["status"] == "running", timeout_s=60)
        # killed right after placing it: a scheduler that dies between committing tasks and
        # sending their messages leaves them to its successor

        first.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        first.wait(10)
        assert deployment.job(running)["status"] == "running"  # it lives through the takeover
        new = deployment.create_job(PARTIES, steps=20)
        deployment.wait_job(new, lambda j: j["status"] != "queued", timeout_s=LEASE_S + 10)
        assert time.monotonic() - killed_at < LEASE_S + 5
        assert lease_holder_pid(database) == deployment.api.pid

        for job_id in (running, new):
            job = deployment.wait_job(job_id, lambda j: j["status"] != "running", timeout_s=180)
            assert job["status"] == "succeeded", f"{why(job)}\n{deployment.logs()}"
        series = deployment.call("GET", f"/jobs/{running}/metrics?names=loss&max_points=10000")
        expected = list(range(every, steps + 1, every))
        assert {s["rank"]: [p["step"] for p in s["points"]] for s in series["series"]} == {
            0: expected,
            1: expected,
        }
    finally:
        deployment.stop()
