"""What a worker does with a delivered task id, against the real control plane (no ranks start).

A delivery is idempotent: a finished task is skipped, a task some worker had started before it
died fails the attempt, and a task whose job is being cancelled stops without launching ranks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tessera_ml.worlds import free_port
from tessera_worker import hardware
from tessera_worker.agent import Agent
from tessera_worker.celery_app import run_task
from tessera_worker.client import ControlPlane
from tessera_worker.identity import WorkerIdentity
from tessera_worker.launch import TaskLaunch
from tessera_worker.launcher import LaunchSettings, Outcome
from tessera_worker.runtime import ControlPlaneUnavailable, Runtime
from tests.worker.plane import ADMIN, Plane


def runtime(plane: Plane, party: str, home: Path) -> Runtime:
    api = ControlPlane("http://testserver", plane.tokens[party], http=plane.client)
    identity = WorkerIdentity(home / "identity" / party, f"{party}-1")
    agent = Agent(
        api,
        describe=lambda: hardware.describe(f"{party}-1", "127.0.0.1"),
        accelerators=list,
        identity=identity,
    )
    agent.register()
    return Runtime(
        party=party,
        api=api,
        agent=agent,
        launch=LaunchSettings(home=home),
        address="127.0.0.1",
        identity=identity,
    )


def task_of(plane: Plane, job_id: str, party: str) -> str:
    tasks = plane.job(job_id)["attempts"][-1]["tasks"]
    return str(next(t["id"] for t in tasks if t["party"] == party))


def report(plane: Plane, party: str, task_id: str, status: str) -> None:
    auth = {"Authorization": f"Bearer {plane.tokens[party]}"}
    response = plane.client.post(
        f"/api/v1/tasks/{task_id}/status", json={"status": status}, headers=auth
    )
    assert response.status_code == 200, response.text


def test_a_finished_task_is_skipped(plane: Plane, tmp_path: Path) -> None:
    alice = runtime(plane, "alice", tmp_path)
    job_id = plane.create_job("alice")
    task = task_of(plane, job_id, "alice")
    report(plane, "alice", task, "succeeded")

    assert alice.execute(task) == "skipped"
    assert plane.job(job_id)["status"] == "succeeded"
    assert not alice.launch.log_dir(task).exists()


def test_a_task_taken_up_as_the_worker_stops_ends_at_once_and_says_so(
    plane: Plane, tmp_path: Path
) -> None:
    """A delivery that arrives while the worker shuts down starts no rank: a task it ran anyway
    would keep the worker from stopping until it was killed, unreported."""
    alice = runtime(plane, "alice", tmp_path)
    job_id = plane.create_job("alice")
    task = task_of(plane, job_id, "alice")
    alice.agent.stop_everything()

    assert alice.execute(task) == "failed"
    job = plane.job(job_id)
    assert job["status"] == "failed"
    assert job["status_reason"] == "party alice rank 0: the worker shut down while the task ran"
    assert not list(alice.launch.log_dir(task).glob("rank-*.log"))


def test_a_task_started_by_a_worker_that_died_fails_the_attempt(
    plane: Plane,
    tmp_path: Path,
) -> None:
    alice = runtime(plane, "alice", tmp_path)
    job_id = plane.create_job("alice")
    task = task_of(plane, job_id, "alice")
    report(plane, "alice", task, "running")

    assert alice.execute(task) == "failed"
    job = plane.job(job_id)
    assert job["status"] == "failed"
    assert job["status_reason"] == "party alice rank 0: the worker restarted while running the task"
    assert not alice.launch.log_dir(task).exists()


def test_a_task_cancelled_before_it_started_is_skipped_without_launching_ranks(
    plane: Plane,
    tmp_path: Path,
) -> None:
    alice = runtime(plane, "alice", tmp_path)
    plane.register("bob", "bob-1")
    job_id = plane.create_job("alice", "bob")
    mine, theirs = task_of(plane, job_id, "alice"), task_of(plane, job_id, "bob")
    report(plane, "bob", theirs, "running")
    response = plane.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=ADMIN)
    assert response.json()["status"] == "cancelling"

    assert alice.execute(mine) == "skipped"
    assert not alice.launch.log_dir(mine).exists()
    report(plane, "bob", theirs, "cancelled")
    assert plane.job(job_id)["status"] == "cancelled"


def test_a_task_cancelled_after_the_worker_fetched_it_launches_no_ranks(
    plane: Plane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = runtime(plane, "alice", tmp_path)
    job_id = plane.create_job("alice")
    task = task_of(plane, job_id, "alice")
    fetch = alice.api.task

    def fetch_then_cancel(task_id: str) -> dict[str, Any]:
        launch = fetch(task_id)
        response = plane.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=ADMIN)
        assert response.json()["status"] == "cancelled"
        return launch

    monkeypatch.setattr(alice.api, "task", fetch_then_cancel)
    assert alice.execute(task) == "cancelled"
    assert not alice.launch.log_dir(task).exists()
    job = plane.job(job_id)
    assert job["status"] == "cancelled"
    assert job["attempts"][-1]["tasks"][0]["status"] == "cancelled"


def test_a_task_delivered_while_the_control_plane_is_down_is_delivered_again(
    plane: Plane, tmp_path: Path
) -> None:
    alice = runtime(plane, "alice", tmp_path)
    job_id = plane.create_job("alice")
    task = task_of(plane, job_id, "alice")
    alice.api = ControlPlane(f"http://127.0.0.1:{free_port()}", plane.tokens["alice"])

    with pytest.raises(ControlPlaneUnavailable, match="cannot reach the control plane"):
        alice.execute(task)
    assert ControlPlaneUnavailable in run_task.autoretry_for
    assert plane.job(job_id)["attempts"][-1]["tasks"][0]["status"] == "assigned"


def test_a_failure_is_reported_even_when_its_last_lines_are_refused(
    plane: Plane, tmp_path: Path
) -> None:
    alice = runtime(plane, "alice", tmp_path)
    long_job, refused_job = plane.create_job("alice"), plane.create_job("alice")
    for job_id, rank, lines in ((long_job, 0, ["x" * 20_000, "tail"]), (refused_job, None, ["?"])):
        launch = TaskLaunch.model_validate(alice.api.task(task_of(plane, job_id, "alice")))
        alice._report(launch, Outcome("failed", "boom", rank, "alice", 1, lines))

        assert plane.job(job_id)["status_reason"] == "party alice rank 0: boom"
    logs = plane.client.get(f"/api/v1/jobs/{long_job}/logs", headers=ADMIN).json()["data"]
    assert [len(line["message"]) for line in logs] == [16_000, 4]


@pytest.mark.parametrize("shutting_down", [False, True], ids=["running", "shutting-down"])
def test_a_report_the_control_plane_cannot_take_is_retried_unless_the_worker_shuts_down(
    plane: Plane, tmp_path: Path, capsys: pytest.CaptureFixture[str], shutting_down: bool
) -> None:
    """Through an outage the status is retried (each retry said in the worker's log); a worker
    shutting down tries once, so its exit does not wait out the outage."""
    alice = runtime(plane, "alice", tmp_path)
    launch = TaskLaunch.model_validate(
        alice.api.task(task_of(plane, plane.create_job("alice"), "alice"))
    )
    alice.api = ControlPlane(f"http://127.0.0.1:{free_port()}", plane.tokens["alice"])
    alice.report_patience_s = 1.0
    alice.agent.shutting_down = shutting_down
    tries = 0
    post_status = alice.api.post_status

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal tries
        tries += 1
        return post_status(*args, **kwargs)

    alice.api.post_status = counted  # type: ignore[method-assign]
    alice._report(launch, Outcome("failed", "the worker shut down while the task ran"))

    log = capsys.readouterr().out
    assert f"gave up reporting {launch.task_id}" in log
    if shutting_down:
        assert tries == 1 and "retry" not in log
    else:
        assert tries >= 2 and f"reporting {launch.task_id} failed" in log
