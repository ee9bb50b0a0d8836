"""Stopping ``tessera up`` while a job runs: its workers stop first and report."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tessera_api.db import scratch_postgres
from tessera_ml.worlds import free_port
from tests.e2e.platform import running_everywhere, start_platform

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.serial]


def test_stopping_up_ends_its_workers_tasks_while_the_server_still_hears_them(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    """The task a stopping worker ends is reported before the server goes, so that after a
    restart the job already says why it ended (it does not wait to be found abandoned)."""
    home = tmp_path / "home"
    home.mkdir()
    with scratch_postgres(postgres_url, prefix="tessera_up_stop") as database:
        wiring = {"database_url": database, "broker_url": redis_url}
        first = start_platform(home, free_port(), parties="alice", workers="alice", **wiring)
        try:
            job_id = first.create_job(["alice"], steps=10_000_000)
            first.wait_job(job_id, running_everywhere)
            first.process.send_signal(signal.SIGINT)
            assert first.process.wait(60) == 0
        finally:
            first.stop()
        said = (home / "up.out").read_text()
        assert "stopping the local workers, then the server" in said

        second = start_platform(home, free_port(), parties="alice", workers="alice", **wiring)
        try:
            job = second.job(job_id)
        finally:
            second.stop()
    assert job["status"] == "failed", job
    assert "the worker shut down while the task ran" in job["status_reason"]
