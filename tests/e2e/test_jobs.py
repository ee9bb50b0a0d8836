"""Jobs end to end: the API, real Celery workers on Redis, real gloo ranks of two parties."""

from __future__ import annotations

import hashlib
import os
import signal
import time
from typing import Any

import pytest

from tessera_ml.bench.ddp.bench import bench_job, ddp_outcomes
from tests.e2e.platform import Platform, why
from tests.worker.proc_scan import pids_with, wait_for, wait_until_gone

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.serial]


def _tasks(job: dict[str, Any]) -> list[dict[str, Any]]:
    tasks: list[dict[str, Any]] = job["attempts"][-1]["tasks"]
    return tasks


def _rank_marker(task_id: str, rank: int | None = None) -> str:
    return f"logs/{task_id}/rank-{'' if rank is None else f'{rank}.json'}"


def _live_ranks(job: dict[str, Any]) -> list[int]:
    return [pid for t in _tasks(job) for pid in pids_with(_rank_marker(t["id"]))]


def _steps_every_rank_saved(platform: Platform, job_id: str, ranks: set[int]) -> set[int]:
    saved: dict[int, set[int]] = {}
    for c in platform.get(f"/jobs/{job_id}/checkpoints"):
        saved.setdefault(c["step"], set()).add(c["rank"])
    return {step for step, by in saved.items() if by == ranks}


def test_a_job_waits_for_a_party_without_worker_then_runs_to_success(platform: Platform) -> None:
    job_id = platform.create_job(["alice", "carol"], steps=20)
    job = platform.wait_job(job_id, lambda j: j["status_reason"].startswith("waiting"), 30)
    assert (job["status"], job["status_reason"]) == (
        "queued",
        "waiting for a worker of party carol",
    )

    platform.start_worker("carol")
    job = platform.wait_status(job_id, "succeeded", "failed", "cancelled")

    assert job["status"] == "succeeded", why(job)
    assert {t["party"]: t["status"] for t in _tasks(job)} == {
        "alice": "succeeded",
        "carol": "succeeded",
    }
    series = platform.get(f"/jobs/{job_id}/metrics", names="loss")["series"]
    steps = {s["rank"]: [p["step"] for p in s["points"]] for s in series}
    assert steps == {0: [5, 10, 15, 20], 1: [5, 10, 15, 20]}
    assert _live_ranks(job) == []


def test_a_platform_job_trains_exactly_as_the_benchmark_measures(platform: Platform) -> None:
    """The benchmark's ddp job and the same job through the platform (API, broker, worker,
    launcher, rank processes) call one training function with one configuration: the same
    loss at every step on every rank."""
    assignments, config = bench_job({"steps": 12, "batch_size": 8, "seed": 4}, ranks=2)
    body = {
        "name": "bench twin",
        "algorithm": "ddp",
        "config": config,
        "assignments": [{**a, "party": "alice"} for a in assignments],
    }
    job_id = str(platform.post("/jobs", body)["id"])
    job = platform.wait_status(job_id, "succeeded", "failed", "cancelled")
    assert job["status"] == "succeeded", why(job)
    series = platform.get(f"/jobs/{job_id}/metrics", names="loss", max_points=100)["series"]
    on_platform = {s["rank"]: dict((p["step"], p["value"]) for p in s["points"]) for s in series}

    benchmarked = {o.rank: dict(o.series("loss")) for o in ddp_outcomes(config, ranks=2)}
    assert set(on_platform) == set(benchmarked) == {0, 1}
    for rank, curve in benchmarked.items():
        assert list(curve) == list(range(1, 13))
        assert on_platform[rank] == pytest.approx(curve, rel=1e-6)


def test_cancel_stops_every_rank_of_every_party_within_ten_seconds(platform: Platform) -> None:
    job_id = platform.create_job(["alice", "bob"], steps=10_000_000)
    job = platform.wait_job(job_id, lambda j: all(t["status"] == "running" for t in _tasks(j)))
    for task in _tasks(job):
        assert len(wait_for(_rank_marker(task["id"]), 1, 60)) == 1

    cancelled_at = time.monotonic()
    platform.post(f"/jobs/{job_id}/cancel")
    left = [wait_until_gone(_rank_marker(t["id"]), 10) for t in _tasks(job)]
    gone_after = time.monotonic() - cancelled_at

    assert left == [[], []]
    assert gone_after < 10
    job = platform.wait_status(job_id, "cancelled", "failed", timeout_s=15)
    assert job["status"] == "cancelled", job


def _shared_file_matches_its_record(platform: Platform, job_id: str, *, step: int) -> None:
    """``tessera up``'s workers share checkpoint files: alice's rank 0 file of ``step`` comes
    back byte for byte as recorded, to alice only."""
    deadline = time.monotonic() + 30
    while True:
        listed = platform.get(f"/jobs/{job_id}/checkpoints")
        record = next(c for c in listed if (c["step"], c["rank"]) == (step, 0))
        if record["shared"]:
            break
        assert time.monotonic() < deadline, f"the file was not shared: {record}"
        time.sleep(0.2)
    path = f"/jobs/{job_id}/checkpoints/1/{step}/0/file"
    mine = platform.http.get(path, headers={"Authorization": f"Bearer {platform.token('alice')}"})
    assert mine.status_code == 200 and hashlib.sha256(mine.content).hexdigest() == record["sha256"]
    theirs = platform.http.get(path, headers={"Authorization": f"Bearer {platform.token('bob')}"})
    assert theirs.status_code == 403


def test_a_killed_rank_fails_the_attempt_and_retry_resumes_from_the_checkpoint(
    platform: Platform,
) -> None:
    job_id = platform.create_job(["alice", "bob"], steps=10_000_000, checkpoint_interval=5)
    job = platform.wait_job(job_id, lambda j: all(t["status"] == "running" for t in _tasks(j)))
    bob = next(t for t in _tasks(job) if t["party"] == "bob")
    deadline = time.monotonic() + 90
    while not (complete := _steps_every_rank_saved(platform, job_id, ranks={0, 1})):
        assert time.monotonic() < deadline, "no checkpoint of every rank was reported"
        time.sleep(0.2)
    checkpointed = max(complete)
    _shared_file_matches_its_record(platform, job_id, step=checkpointed)

    (victim,) = pids_with(_rank_marker(bob["id"], 1), ranks_only=True)
    os.kill(victim, signal.SIGKILL)

    job = platform.wait_status(job_id, "failed", "succeeded", "cancelled", timeout_s=60)
    assert job["status"] == "failed", job
    reason = job["attempts"][-1]["failure_reason"]
    assert reason.startswith("party bob rank 1:"), reason
    assert "SIGKILL" in reason
    assert [wait_until_gone(_rank_marker(t["id"]), 15) for t in _tasks(job)] == [[], []]

    platform.post(f"/jobs/{job_id}/retry")
    job = platform.wait_job(job_id, lambda j: len(j["attempts"]) == 2 and j["status"] == "running")
    resumed = job["attempts"][-1]["resume_from"]
    assert resumed is not None and resumed["step"] >= checkpointed
    # every member of the job reads this: a name inside the job's folder, no host's path
    assert resumed["uri"] == f"step-{resumed['step']:09d}"
    deadline = time.monotonic() + 90
    while True:
        series = platform.get(f"/jobs/{job_id}/metrics", names="loss", attempt=2)["series"]
        if series and series[0]["points"]:
            break
        assert time.monotonic() < deadline, "the retried attempt reported no loss"
        time.sleep(0.3)
    first_step = min(p["step"] for s in series for p in s["points"])
    assert first_step > resumed["step"]
    platform.post(f"/jobs/{job_id}/cancel")
    job = platform.wait_status(job_id, "cancelled", "failed", timeout_s=30)
    assert _live_ranks(job) == []
