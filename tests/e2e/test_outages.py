"""Jobs through an operator's restarts and kills: ``tessera api`` and the workers as processes."""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tessera_api.db import scratch_postgres
from tessera_ml.worlds import free_port
from tessera_worker.launcher import shared_memory
from tests.e2e.deployment import Deployment
from tests.e2e.platform import running_everywhere, why

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.serial]

PARTIES = ("north", "south")


@pytest.fixture(scope="module")
def deployment(
    postgres_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    home: Path = tmp_path_factory.mktemp("outage-home")
    with scratch_postgres(postgres_url, prefix="tessera_outage") as database:
        running = Deployment(home, free_port(), database, redis_url)
        try:
            running.start_api()
            running.wait_serving()
            for party in PARTIES:
                running.add_party(party)
                running.start_worker(party)
            running.wait_online(*PARTIES)
            yield running
        finally:
            running.stop()
            # a worker killed with SIGKILL leaves its tasks' shared memory folders behind
            for task in (home / "tasks").glob("*"):
                shutil.rmtree(shared_memory(task.name), ignore_errors=True)


def workers_up(deployment: Deployment) -> None:
    for party in PARTIES:
        proc = deployment.workers.get(party)
        if proc is None or proc.poll() is not None:
            deployment.start_worker(party)
    deployment.wait_online(*PARTIES)


def loss_steps(deployment: Deployment, job_id: str) -> dict[int, list[int]]:
    series = deployment.call("GET", f"/jobs/{job_id}/metrics?names=loss&max_points=10000")
    return {s["rank"]: [p["step"] for p in s["points"]] for s in series["series"]}


def test_a_job_outlives_a_60_s_outage_of_the_control_plane(deployment: Deployment) -> None:
    workers_up(deployment)
    steps, every = 1500, 50
    job_id = deployment.create_job(list(PARTIES), steps=steps, log_interval=every)
    deployment.wait_job(job_id, lambda j: bool(loss_steps(deployment, j["id"])), timeout_s=90)

    deployment.stop_api()
    time.sleep(60)
    deployment.start_api()
    deployment.wait_serving()

    job = deployment.wait_job(job_id, lambda j: j["status"] != "running", timeout_s=180)
    assert job["status"] == "succeeded", f"{why(job)}\n{deployment.logs()}"
    expected = list(range(every, steps + 1, every))
    assert loss_steps(deployment, job_id) == {0: expected, 1: expected}


def test_the_api_serves_again_within_5_s_of_being_stopped(deployment: Deployment) -> None:
    deployment.stop_api()
    deployment.start_api()
    assert deployment.wait_serving() < 5


def test_a_worker_killed_mid_job_is_blamed_within_10_s(deployment: Deployment) -> None:
    workers_up(deployment)
    job_id = deployment.create_job(list(PARTIES), steps=10_000_000, log_interval=10)
    deployment.wait_job(job_id, lambda j: len(loss_steps(deployment, j["id"])) == 2, timeout_s=90)

    deployment.workers["south"].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    job = deployment.wait_job(job_id, lambda j: j["status"] == "failed", timeout_s=30)

    assert time.monotonic() - killed_at < 10
    assert job["status_reason"].startswith("party south "), job["status_reason"]
    assert "host-south" in job["status_reason"]


def test_a_worker_restarted_at_once_ends_its_old_task(deployment: Deployment) -> None:
    workers_up(deployment)
    job_id = deployment.create_job(list(PARTIES), steps=10_000_000)
    job = deployment.wait_job(job_id, running_everywhere, timeout_s=90)
    south = next(t for t in job["attempts"][-1]["tasks"] if t["party"] == "south")

    deployment.workers["south"].send_signal(signal.SIGKILL)
    deployment.workers["south"].wait(10)
    deployment.start_worker("south")

    def ended(j: dict[str, object]) -> bool:
        tasks = j["attempts"][-1]["tasks"]  # type: ignore[index]
        return next(t for t in tasks if t["id"] == south["id"])["status"] != "running"  # type: ignore[index]

    job = deployment.wait_job(job_id, ended, timeout_s=15)
    task = next(t for t in job["attempts"][-1]["tasks"] if t["id"] == south["id"])
    assert task["status"] == "failed"
    assert job["status"] == "failed"
    # the restarted worker removed what the killed one's task left: its key, its shared memory
    assert not (deployment.home / "tasks" / south["id"]).exists()
    assert not Path(shared_memory(south["id"])).exists()
    said = [line for line in deployment.log("worker-south.out").splitlines() if "left: " in line]
    assert said and south["id"] in said[-1].split("left: ")[1].split(", ")


def test_disabling_a_party_mid_job_ends_it_naming_the_disable(deployment: Deployment) -> None:
    workers_up(deployment)
    job_id = deployment.create_job(list(PARTIES), steps=10_000_000)
    deployment.wait_job(job_id, running_everywhere, timeout_s=90)

    deployment.call("POST", "/parties/south/disable")

    job = deployment.wait_job(job_id, lambda j: j["status"] == "failed", timeout_s=15)
    assert "party south was disabled" in job["status_reason"]
    deployment.workers["south"].wait(30)  # cut off: it stops by itself
    assert "party 'south' is disabled" in deployment.log("worker-south.out")
