"""The scheduler behind the control plane's dispatcher seam, over a real SQLite database.

The broker is replaced by a recorder of what would be sent; the end-to-end tests use Redis.
"""

from __future__ import annotations

import time
from datetime import timedelta

from tessera_api.models import Job, Worker, utcnow
from tessera_api.scheduling.lease import Lease
from tessera_api.scheduling.scheduler import Scheduler
from tessera_worker import hardware
from tessera_worker.agent import Agent
from tessera_worker.client import ControlPlane
from tests.worker.plane import ADMIN, Plane, Recorder


def test_a_job_waits_for_a_party_then_starts_when_its_worker_registers(plane: Plane) -> None:
    alice = plane.register("alice", "a1")
    job_id = plane.create_job("alice", "bob")

    job = plane.job(job_id)
    assert (job["status"], job["status_reason"]) == ("queued", "waiting for a worker of party bob")
    assert plane.sender.sent == []

    bob = plane.register("bob", "b1")
    plane.scheduler.tick()

    job = plane.job(job_id)
    assert job["status"] == "running"
    tasks = {t["party"]: t for t in job["attempts"][-1]["tasks"]}
    assert {p: (t["worker_id"], t["ranks"]) for p, t in tasks.items()} == {
        "alice": (alice, [{"rank": 0, "device": "cpu", "role": "trainer", "backend": "gloo"}]),
        "bob": (bob, [{"rank": 1, "device": "cpu", "role": "trainer", "backend": "gloo"}]),
    }
    assert sorted((s["party"], s["worker_id"], s["task_id"]) for s in plane.sender.sent) == [
        ("alice", alice, tasks["alice"]["id"]),
        ("bob", bob, tasks["bob"]["id"]),
    ]


def test_ranks_on_gpus_run_nccl_inside_their_party_cpu_parties_gloo(plane: Plane) -> None:
    plane.register("alice", "a1", gpus=2)
    plane.register("bob", "b1", gpus=0)
    job_id = plane.create_job("alice", "bob")

    job = plane.job(job_id)
    assert job["device"] == "auto"
    tasks = {t["party"]: t for t in job["attempts"][-1]["tasks"]}
    assert [(r["device"], r["backend"]) for r in tasks["alice"]["ranks"]] == [("cuda:0", "nccl")]
    assert [(r["device"], r["backend"]) for r in tasks["bob"]["ranks"]] == [("cpu", "gloo")]
    for party, backend in (("alice", "nccl"), ("bob", "gloo")):
        auth = {"Authorization": f"Bearer {plane.tokens[party]}"}
        launch = plane.client.get(f"/api/v1/tasks/{tasks[party]['id']}", headers=auth).json()
        assert launch["backend"] == backend


def test_a_job_that_needs_gpus_waits_for_busy_ones_and_says_why(plane: Plane) -> None:
    plane.register("alice", "a1", gpus=1)
    plane.register("bob", "b1", gpus=1)
    first = plane.create_job("alice", "bob")
    assert plane.job(first)["status"] == "running"

    second = plane.create_job("alice", "bob", device="cuda")
    job = plane.job(second)
    assert (job["status"], job["status_reason"]) == (
        "queued",
        "party alice has no free GPU for role trainer",
    )
    on_cpu = plane.create_job("alice", "bob", device="cpu")
    assert plane.job(on_cpu)["status"] == "running"


def test_a_running_task_whose_worker_goes_offline_fails_the_attempt(plane: Plane) -> None:
    plane.register("alice", "a1")
    bob = plane.register("bob", "b1")
    job_id = plane.create_job("alice", "bob")
    assert plane.job(job_id)["status"] == "running"

    with plane.client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        worker = session.get(Worker, bob)
        worker.last_heartbeat = utcnow() - timedelta(minutes=5)
        session.commit()
    plane.scheduler.hearing_since = utcnow() - timedelta(minutes=10)
    plane.scheduler.tick()

    job = plane.job(job_id)
    assert job["status"] == "failed"
    assert job["status_reason"] == "party bob rank 1: worker b1 went offline"


def test_silence_while_the_control_plane_was_down_does_not_count(plane: Plane) -> None:
    plane.register("alice", "a1")
    plane.register("bob", "b1")
    job_id = plane.create_job("alice", "bob")
    with plane.client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        for worker in session.query(Worker).all():
            worker.last_heartbeat = utcnow() - timedelta(seconds=48)  # the outage
        session.commit()

    plane.scheduler.hearing_since = utcnow() - timedelta(seconds=1)  # it just came back
    plane.scheduler.tick()
    assert plane.job(job_id)["status"] == "running"

    plane.scheduler.hearing_since = utcnow() - timedelta(seconds=31)  # heard nothing since
    plane.scheduler.tick()
    job = plane.job(job_id)
    assert job["status"] == "failed"
    assert "went offline" in job["status_reason"]


def test_a_message_the_broker_refused_is_sent_on_the_next_pass(plane: Plane) -> None:
    plane.register("alice", "a1")
    plane.sender.refuse = 1
    job_id = plane.create_job("alice")
    assert plane.job(job_id)["status"] == "running"
    assert plane.sender.sent == []

    plane.scheduler.tick()

    (task,) = plane.job(job_id)["attempts"][-1]["tasks"]
    assert [s["task_id"] for s in plane.sender.sent] == [task["id"]]


def test_the_heartbeat_reply_stops_the_tasks_of_a_cancelled_job(plane: Plane) -> None:
    api = ControlPlane("http://testserver", plane.tokens["alice"], http=plane.client)
    agent = Agent(api, describe=lambda: hardware.describe("a1", "127.0.0.1"), accelerators=list)
    alice = agent.register()
    plane.register("bob", "b1")
    job_id = plane.create_job("alice", "bob")
    tasks = plane.job(job_id)["attempts"][-1]["tasks"]
    (mine,) = [t["id"] for t in tasks if t["worker_id"] == alice]

    with agent.track(mine) as stop:
        api.post_status(mine, "running")
        assert agent.beat() == []
        assert not stop.is_set()
        response = plane.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=ADMIN)
        assert response.status_code == 200, response.text
        assert agent.beat() == [mine]
        assert stop.is_set()
    job = plane.job(job_id)
    assert job["status"] == "cancelling"
    statuses = {t["id"]: t["status"] for t in job["attempts"][-1]["tasks"]}
    assert statuses.pop(mine) == "running"
    assert list(statuses.values()) == ["cancelled"]  # bob's, never started


def _assigned_ago(plane: Plane, job_id: str, seconds: float) -> None:
    """Backdate every task of the job's current attempt, as if placed ``seconds`` ago."""
    with plane.client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        job = session.get(Job, job_id)
        for task in job.attempts[-1].tasks:
            task.created_at = utcnow() - timedelta(seconds=seconds)
        session.commit()


def test_a_task_its_online_worker_never_starts_fails_the_attempt_after_the_timeout(
    plane: Plane,
) -> None:
    plane.register("alice", "a1")
    plane.register("bob", "b1")
    job_id = plane.create_job("alice", "bob")
    tasks = {t["party"]: t["id"] for t in plane.job(job_id)["attempts"][-1]["tasks"]}
    auth = {"Authorization": f"Bearer {plane.tokens['alice']}"}
    started = plane.client.post(
        f"/api/v1/tasks/{tasks['alice']}/status", json={"status": "running"}, headers=auth
    )
    assert started.status_code == 200, started.text
    timeout = plane.scheduler.start_timeout_s
    assert timeout == 300
    plane.scheduler.hearing_since = utcnow() - timedelta(hours=1)

    _assigned_ago(plane, job_id, timeout - 5)
    plane.scheduler.tick()
    assert plane.job(job_id)["status"] == "running"

    _assigned_ago(plane, job_id, timeout + 1)
    plane.scheduler.tick()
    job = plane.job(job_id)
    assert job["status"] == "failed"
    reason = "worker b1 of party bob did not start its task within 300 s"
    assert job["status_reason"] == f"party bob rank 1: {reason}"
    statuses = {t["party"]: (t["status"], t["reason"]) for t in job["attempts"][-1]["tasks"]}
    assert statuses == {"alice": ("running", None), "bob": ("failed", reason)}


def test_a_started_task_is_never_failed_by_the_start_timeout(plane: Plane) -> None:
    plane.register("alice", "a1")
    job_id = plane.create_job("alice")
    (task,) = plane.job(job_id)["attempts"][-1]["tasks"]
    auth = {"Authorization": f"Bearer {plane.tokens['alice']}"}
    plane.client.post(
        f"/api/v1/tasks/{task['id']}/status", json={"status": "starting"}, headers=auth
    )
    _assigned_ago(plane, job_id, plane.scheduler.start_timeout_s * 10)

    plane.scheduler.tick()

    assert plane.job(job_id)["status"] == "running"


def _report(plane: Plane, party: str, task_id: str, **body: object) -> None:
    auth = {"Authorization": f"Bearer {plane.tokens[party]}"}
    response = plane.client.post(f"/api/v1/tasks/{task_id}/status", json=body, headers=auth)
    assert response.status_code == 200, response.text


def _silent_for(plane: Plane, worker_id: str, seconds: float) -> None:
    with plane.client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        worker = session.get(Worker, worker_id)
        worker.last_heartbeat = utcnow() - timedelta(seconds=seconds)
        session.commit()


def _running_pair(plane: Plane) -> tuple[str, dict[str, str], str]:
    plane.register("alice", "a1")
    bob = plane.register("bob", "b1")
    job_id = plane.create_job("alice", "bob")
    tasks = {t["party"]: t["id"] for t in plane.job(job_id)["attempts"][-1]["tasks"]}
    for party, task in tasks.items():
        _report(plane, party, task, status="running")
    plane.scheduler.hearing_since = utcnow() - timedelta(hours=1)
    return job_id, tasks, bob


def test_a_lost_peer_report_blames_the_worker_that_went_silent(plane: Plane) -> None:
    job_id, tasks, bob = _running_pair(plane)
    _report(
        plane,
        "alice",
        tasks["alice"],
        status="failed",
        rank=0,
        reason="exited with code 1: LinkError: the peer closed the link",
        lost_peer=True,
    )
    assert plane.job(job_id)["status"] == "running"  # not alice's fault, perhaps

    _silent_for(plane, bob, plane.scheduler.lost_worker_after_s + 1)
    plane.scheduler.tick()

    job = plane.job(job_id)
    assert job["status"] == "failed"
    assert job["status_reason"] == "party bob rank 1: its worker b1 stopped answering"


def test_a_lost_peer_report_fails_the_attempt_itself_when_nobody_went_silent(
    plane: Plane,
) -> None:
    job_id, tasks, _ = _running_pair(plane)
    reason = "exited with code 1: connection reset by peer"
    _report(plane, "alice", tasks["alice"], status="failed", rank=0, reason=reason, lost_peer=True)
    plane.scheduler.tick()
    assert plane.job(job_id)["status"] == "running"

    with plane.client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        job = session.get(Job, job_id)
        for task in job.attempts[-1].tasks:
            if task.lost_peer:
                task.finished_at = utcnow() - timedelta(seconds=plane.scheduler.blame_window_s + 1)
        session.commit()
    plane.scheduler.tick()

    job = plane.job(job_id)
    assert job["status"] == "failed"
    assert job["status_reason"] == f"party alice rank 0: {reason}"


def test_a_worker_that_registers_again_ends_the_tasks_it_had_started(plane: Plane) -> None:
    job_id, _, bob = _running_pair(plane)

    assert plane.register("bob", "b1") == bob  # the same worker, restarted

    job = plane.job(job_id)
    reason = "its worker b1 restarted; the task's ranks ended with it"
    assert job["status"] == "failed"
    assert job["status_reason"] == f"party bob rank 1: {reason}"
    statuses = {t["party"]: t["status"] for t in job["attempts"][-1]["tasks"]}
    assert statuses["bob"] == "failed"


TTL_S = 2.0


def test_only_the_replica_holding_the_lease_schedules_and_another_takes_over(
    plane: Plane,
) -> None:
    job_id = plane.create_job("alice", "bob")  # queued: no worker yet
    factory = plane.client.app.state.session_factory  # type: ignore[attr-defined]

    sent = {"first": Recorder(), "second": Recorder()}

    def replica(name: str) -> Scheduler:
        # long enough that a loaded machine does not let it lapse while the workers register
        lease = Lease(factory, ttl_s=TTL_S, holder=name)
        return Scheduler(factory, sent[name], offline_after_s=30, interval_s=3600, lease=lease)

    first, second = replica("first"), replica("second")
    first.tick()
    plane.register("alice", "a1")
    plane.register("bob", "b1")

    second.tick()
    assert not second.leading
    assert sent["second"].sent == []
    assert plane.job(job_id)["status"] == "queued"

    first.tick()
    assert first.leading
    assert len(sent["first"].sent) == 2
    assert plane.job(job_id)["status"] == "running"

    time.sleep(TTL_S + 0.1)  # the first replica died: its lease lapses
    before = utcnow()
    second.tick()
    assert second.leading
    assert second.hearing_since >= before  # workers get their time to be heard by the new one
    first.tick()
    assert not first.leading


def test_a_scheduler_that_takes_over_sends_again_what_its_predecessor_may_not_have(
    plane: Plane,
) -> None:
    plane.register("alice", "a1")
    plane.register("bob", "b1")
    job_id = plane.create_job("alice", "bob")  # placed and sent; then the sender died
    tasks = {t["id"] for t in plane.job(job_id)["attempts"][-1]["tasks"]}
    factory = plane.client.app.state.session_factory  # type: ignore[attr-defined]
    sent = Recorder()
    successor = Scheduler(
        factory, sent, offline_after_s=30, interval_s=3600, lease=Lease(factory, holder="next")
    )

    successor.tick()
    assert {s["task_id"] for s in sent.sent} == tasks
    successor.tick()  # once, at the takeover
    assert len(sent.sent) == 2
