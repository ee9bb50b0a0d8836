"""The worker protocol: launch description, rendezvous, task status and its consequences."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.backend.factories import ADMIN, API, get_job, report, running_job, start


def heartbeat(
    client: TestClient, party_auth: dict[str, str], worker: str, tasks: list[str]
) -> list[str]:
    response = client.post(
        f"{API}/workers/{worker}/heartbeat", json={"running_tasks": tasks}, headers=party_auth
    )
    assert response.status_code == 200, response.text
    stop: list[str] = response.json()["stop_tasks"]
    return stop


def test_launch_description_and_rendezvous(client: TestClient) -> None:
    job = running_job(client)
    launch = client.get(f"{API}/tasks/{job.bob_task}", headers=job.bob.auth).json()
    assert launch["job_id"] == job.id and launch["attempt"] == 1
    assert launch["world_size"] == 2 and launch["backend"] == "gloo"
    assert launch["ranks"] == [{"rank": 1, "device": "cpu", "role": "trainer", "backend": "gloo"}]
    assert [s["party"] for s in launch["plan"]] == [job.alice.name, job.bob.name]
    assert launch["rendezvous"] is None and launch["resume_from"] is None
    not_zero = client.post(
        f"{API}/tasks/{job.bob_task}/rendezvous",
        json={"host": "h", "port": 1},
        headers=job.bob.auth,
    )
    assert not_zero.status_code == 409 and not_zero.json()["code"] == "not_rank_zero"
    posted = client.post(
        f"{API}/tasks/{job.alice_task}/rendezvous",
        json={"host": "10.0.0.5", "port": 29500},
        headers=job.alice.auth,
    )
    assert posted.status_code == 204
    launch = client.get(f"{API}/tasks/{job.bob_task}", headers=job.bob.auth).json()
    secret = launch["rendezvous"].pop("secret")
    assert launch["rendezvous"] == {"host": "10.0.0.5", "port": 29500}
    assert len(bytes.fromhex(secret)) == 32
    same = client.get(f"{API}/tasks/{job.alice_task}", headers=job.alice.auth).json()
    assert same["rendezvous"]["secret"] == secret


def test_a_party_reports_only_for_its_own_tasks(client: TestClient) -> None:
    job = running_job(client)
    response = client.post(
        f"{API}/tasks/{job.bob_task}/status", json={"status": "running"}, headers=job.alice.auth
    )
    assert response.status_code == 403
    assert client.get(f"{API}/tasks/{job.bob_task}", headers=job.alice.auth).status_code == 403
    blame = client.post(
        f"{API}/tasks/{job.bob_task}/status",
        json={"status": "failed", "reason": "x", "rank": 0},
        headers=job.bob.auth,
    )
    assert blame.status_code == 422 and blame.json()["code"] == "rank_not_hosted"
    assert get_job(client, job.id)["status"] == "running"


def test_all_tasks_succeeding_succeeds_the_job(client: TestClient) -> None:
    job = running_job(client)
    report(client, job.alice, job.alice_task, status="running")
    report(client, job.alice, job.alice_task, status="succeeded", exit_code=0)
    assert get_job(client, job.id)["status"] == "running"
    report(client, job.bob, job.bob_task, status="succeeded", exit_code=0)
    state = get_job(client, job.id)
    assert state["status"] == "succeeded" and state["finished_at"] is not None
    assert state["attempts"][0]["status"] == "succeeded"


def test_a_failed_task_fails_the_job_naming_party_rank_and_error(client: TestClient) -> None:
    job = running_job(client)
    report(client, job.bob, job.bob_task, status="running")
    report(
        client,
        job.bob,
        job.bob_task,
        status="failed",
        reason="CUDA out of memory",
        rank=1,
        exit_code=1,
    )
    state = get_job(client, job.id)
    assert state["status"] == "failed"
    assert state["status_reason"] == f"party {job.bob.name} rank 1: CUDA out of memory"
    attempt = state["attempts"][0]
    assert attempt["status"] == "failed" and attempt["failure_code"] == "task_failed"
    assert attempt["failure_reason"] == state["status_reason"]
    assert heartbeat(client, job.alice.auth, job.alice_worker, [job.alice_task]) == [job.alice_task]
    report(client, job.alice, job.alice_task, status="cancelled")
    assert get_job(client, job.id)["status"] == "failed"


def test_cancelling_waits_for_the_started_tasks_to_stop(client: TestClient) -> None:
    job = running_job(client)
    report(client, job.alice, job.alice_task, status="running")
    report(client, job.bob, job.bob_task, status="starting")
    assert heartbeat(client, job.alice.auth, job.alice_worker, [job.alice_task]) == []
    response = client.post(f"{API}/jobs/{job.id}/cancel", headers=job.alice.auth)
    assert response.json()["status"] == "cancelling"
    assert heartbeat(client, job.alice.auth, job.alice_worker, [job.alice_task]) == [job.alice_task]
    assert heartbeat(client, job.bob.auth, job.bob_worker, [job.bob_task]) == [job.bob_task]
    report(client, job.alice, job.alice_task, status="cancelled")
    assert get_job(client, job.id)["status"] == "cancelling"
    report(client, job.bob, job.bob_task, status="failed", reason="killed")
    state = get_job(client, job.id)
    assert state["status"] == "cancelled"
    assert state["attempts"][0]["status"] == "cancelled"


def test_a_cancel_ends_the_tasks_that_never_started_at_once(client: TestClient) -> None:
    job = running_job(client)
    response = client.post(f"{API}/jobs/{job.id}/cancel", headers=ADMIN)
    assert response.json()["status"] == "cancelled"
    state = get_job(client, job.id)
    assert state["attempts"][0]["status"] == "cancelled"
    tasks = state["attempts"][0]["tasks"]
    assert [(t["status"], t["reason"]) for t in tasks] == [
        ("cancelled", "cancelled before it started")
    ] * 2
    assert heartbeat(client, job.bob.auth, job.bob_worker, [job.bob_task]) == [job.bob_task]


def test_a_task_picked_up_after_its_job_stopped_may_not_start(client: TestClient) -> None:
    job = running_job(client)
    report(client, job.alice, job.alice_task, status="running")
    client.post(f"{API}/jobs/{job.id}/cancel", headers=ADMIN)
    tasks = {t["id"]: t["status"] for t in get_job(client, job.id)["attempts"][0]["tasks"]}
    assert tasks == {job.alice_task: "running", job.bob_task: "cancelled"}
    late = client.post(
        f"{API}/tasks/{job.bob_task}/status", json={"status": "starting"}, headers=job.bob.auth
    )
    assert late.status_code == 409 and late.json()["code"] == "attempt_not_running"
    assert "cancelling" in late.json()["detail"]
    report(client, job.alice, job.alice_task, status="running")  # a repeat changes nothing
    report(client, job.bob, job.bob_task, status="cancelled")  # the worker's answer to the 409
    assert get_job(client, job.id)["status"] == "cancelling"
    report(client, job.alice, job.alice_task, status="cancelled")
    assert get_job(client, job.id)["status"] == "cancelled"


def test_a_late_report_of_a_previous_attempt_leaves_the_cancel_of_the_current_one(
    client: TestClient,
) -> None:
    job = running_job(client)
    report(client, job.alice, job.alice_task, status="failed", reason="boom", rank=0)
    assert client.post(f"{API}/jobs/{job.id}/retry", headers=ADMIN).status_code == 200
    second = start(
        client,
        job.id,
        {job.alice.name: (job.alice_worker, [0]), job.bob.name: (job.bob_worker, [1])},
    )
    report(client, job.alice, second[0], status="running")
    response = client.post(f"{API}/jobs/{job.id}/cancel", headers=ADMIN)
    assert response.json()["status"] == "cancelling"

    report(client, job.bob, job.bob_task, status="cancelled")

    state = get_job(client, job.id)
    assert state["status"] == "cancelling"
    assert [a["status"] for a in state["attempts"]] == ["failed", "running"]


def test_a_task_stopping_on_its_own_fails_the_job(client: TestClient) -> None:
    job = running_job(client)
    report(client, job.alice, job.alice_task, status="cancelled", reason="worker shut down")
    state = get_job(client, job.id)
    assert state["status"] == "failed"
    assert state["attempts"][0]["failure_code"] == "task_cancelled"
    assert "worker shut down" in state["status_reason"]


def test_terminal_tasks_cannot_move_again(client: TestClient) -> None:
    job = running_job(client)
    report(client, job.alice, job.alice_task, status="succeeded")
    again = report(client, job.alice, job.alice_task, status="succeeded")
    assert again["status"] == "succeeded"
    response = client.post(
        f"{API}/tasks/{job.alice_task}/status", json={"status": "running"}, headers=job.alice.auth
    )
    assert response.status_code == 409
    assert "succeeded" in response.json()["detail"]


def test_heartbeat_stops_unknown_and_foreign_tasks(client: TestClient) -> None:
    job = running_job(client)
    stop = heartbeat(client, job.alice.auth, job.alice_worker, ["nope", job.bob_task])
    assert stop == ["nope", job.bob_task]
