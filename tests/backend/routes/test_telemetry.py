"""Metrics ingest and downsampled queries, log cursors, checkpoints and resuming from them."""

from __future__ import annotations

import math
from typing import Any

from fastapi.testclient import TestClient

from tessera_api.services.series import SeriesCache
from tests.backend.factories import ADMIN, API, report, running_job

SHA = "0" * 64


def post_points(client: TestClient, job: Any, task: str, auth: Any, points: list[Any]) -> Any:
    return client.post(
        f"{API}/jobs/{job.id}/metrics", json={"task_id": task, "points": points}, headers=auth
    )


def test_metrics_round_trip_and_downsampling(client: TestClient) -> None:
    job = running_job(client)
    n = 5000
    points = [{"rank": 0, "name": "loss", "step": s, "value": math.sin(s / 100)} for s in range(n)]
    points += [{"rank": 0, "name": "accuracy", "step": s, "value": s / 100} for s in range(100)]
    late, early = points[: n // 2], points[n // 2 :]
    assert post_points(client, job, job.alice_task, job.alice.auth, early).status_code == 204
    assert post_points(client, job, job.alice_task, job.alice.auth, late).status_code == 204
    raw = client.get(f"{API}/jobs/{job.id}/metrics?names=accuracy", headers=ADMIN).json()
    assert raw["attempt"] == 1
    [series] = raw["series"]
    assert (series["name"], series["rank"], series["downsampled"]) == ("accuracy", 0, False)
    assert [p["step"] for p in series["points"]] == list(range(100))
    assert series["points"][7]["value"] == 0.07
    down = client.get(
        f"{API}/jobs/{job.id}/metrics?names=loss&max_points=100", headers=job.bob.auth
    ).json()
    [loss] = down["series"]
    assert loss["downsampled"] and len(loss["points"]) <= 100
    assert sum(p["count"] for p in loss["points"]) == n
    assert loss["points"][-1]["step"] == n - 1
    assert max(p["max"] for p in loss["points"]) == max(math.sin(s / 100) for s in range(n))
    assert min(p["min"] for p in loss["points"]) == min(math.sin(s / 100) for s in range(n))
    window = client.get(
        f"{API}/jobs/{job.id}/metrics?names=loss&step_min=1000&step_max=1049", headers=ADMIN
    ).json()
    assert [p["step"] for p in window["series"][0]["points"]] == list(range(1000, 1050))
    both = client.get(f"{API}/jobs/{job.id}/metrics?max_points=50", headers=ADMIN).json()
    assert [s["name"] for s in both["series"]] == ["accuracy", "loss"]


def test_a_cached_series_answer_follows_every_new_point(client: TestClient) -> None:
    job = running_job(client)
    url = f"{API}/jobs/{job.id}/metrics?names=loss&max_points=10"

    def steps_and_counts() -> tuple[list[int], int]:
        [series] = client.get(url, headers=ADMIN).json()["series"]
        return [p["step"] for p in series["points"]], sum(p["count"] for p in series["points"])

    first = [{"rank": 0, "name": "loss", "step": s, "value": 1.0} for s in (0, 2, 4)]
    assert post_points(client, job, job.alice_task, job.alice.auth, first).status_code == 204
    assert steps_and_counts() == ([0, 2, 4], 3)
    assert steps_and_counts() == ([0, 2, 4], 3)  # answered again, from the cache
    # a late point inside the known step range: the extent stays, the count does not
    late = [{"rank": 0, "name": "loss", "step": 3, "value": 2.0}]
    assert post_points(client, job, job.alice_task, job.alice.auth, late).status_code == 204
    assert steps_and_counts() == ([0, 2, 3, 4], 4)
    # past max_points the answer turns into buckets, every point still counted
    more = [{"rank": 0, "name": "loss", "step": s, "value": 1.0} for s in range(5, 40)]
    assert post_points(client, job, job.alice_task, job.alice.auth, more).status_code == 204
    buckets, counted = steps_and_counts()
    assert len(buckets) <= 10 and counted == 39 and buckets[-1] == 39


def test_series_cache_keeps_to_its_byte_budget() -> None:
    cache = SeriesCache(max_bytes=10)
    cache.put("a", b"12345")
    cache.put("b", b"6789")
    assert cache.get("a") == b"12345"  # now the most recently used
    cache.put("c", b"xyz")  # 12 bytes: the least recently used ("b") goes
    assert cache.get("b") is None and cache.get("a") == b"12345" and cache.get("c") == b"xyz"
    cache.put("huge", b"0" * 11)  # larger than the whole budget: never held
    assert cache.get("huge") is None and cache.get("a") == b"12345"


def test_downsampling_steps_near_the_largest_allowed(client: TestClient) -> None:
    job = running_job(client)
    n, gap = 1026, 2**53 // 1025
    points = [{"rank": 0, "name": "t", "step": i * gap, "value": float(i)} for i in range(n)]
    stored = client.post(
        f"{API}/jobs/{job.id}/metrics",
        json={"task_id": job.alice_task, "points": points},
        headers=job.alice.auth,
    )
    assert stored.status_code == 204, stored.text
    response = client.get(f"{API}/jobs/{job.id}/metrics?max_points=1025", headers=ADMIN)
    assert response.status_code == 200, response.text
    [series] = response.json()["series"]
    assert series["downsampled"] and len(series["points"]) <= 1025
    assert sum(p["count"] for p in series["points"]) == n
    assert series["points"][-1]["step"] == (n - 1) * gap


def test_metrics_only_for_hosted_ranks_and_own_tasks(client: TestClient) -> None:
    job = running_job(client)
    point = {"rank": 1, "name": "loss", "step": 0, "value": 1.0}
    wrong_rank = post_points(client, job, job.alice_task, job.alice.auth, [point])
    assert wrong_rank.status_code == 422 and wrong_rank.json()["code"] == "rank_not_hosted"
    foreign = post_points(client, job, job.bob_task, job.alice.auth, [point])
    assert foreign.status_code == 403
    bad_name = post_points(client, job, job.bob_task, job.bob.auth, [{**point, "name": "a b"}])
    assert bad_name.status_code == 422


def test_logs_are_read_with_a_cursor_per_task(client: TestClient) -> None:
    job = running_job(client)
    for task, party, rank in ((job.alice_task, job.alice, 0), (job.bob_task, job.bob, 1)):
        lines = [{"rank": rank, "level": "info", "message": f"{party.name} {i}"} for i in range(5)]
        response = client.post(
            f"{API}/jobs/{job.id}/logs", json={"task_id": task, "lines": lines}, headers=party.auth
        )
        assert response.status_code == 204
    page = client.get(f"{API}/jobs/{job.id}/logs?limit=3", headers=ADMIN).json()
    assert [x["message"] for x in page["data"]] == [f"{job.alice.name} {i}" for i in range(3)]
    rest = client.get(
        f"{API}/jobs/{job.id}/logs?after={page['next_cursor']}&task_id={job.bob_task}",
        headers=ADMIN,
    ).json()
    assert [x["message"] for x in rest["data"]] == [f"{job.bob.name} {i}" for i in range(5)]
    done = client.get(f"{API}/jobs/{job.id}/logs?after={rest['next_cursor']}", headers=ADMIN)
    assert done.json() == {"data": [], "next_cursor": rest["next_cursor"]}


def checkpoint(client: TestClient, job: Any, party: Any, task: str, rank: int, step: int) -> None:
    body = {
        "task_id": task,
        "rank": rank,
        "step": step,
        "uri": f"ck/{step}/{rank}",
        "size": 1,
        "sha256": SHA,
    }
    response = client.post(f"{API}/jobs/{job.id}/checkpoints", json=body, headers=party.auth)
    assert response.status_code == 204, response.text


def test_retry_resumes_from_the_last_step_every_rank_saved(client: TestClient) -> None:
    job = running_job(client)
    for step in (100, 200):
        checkpoint(client, job, job.alice, job.alice_task, 0, step)
        checkpoint(client, job, job.bob, job.bob_task, 1, step)
    checkpoint(client, job, job.alice, job.alice_task, 0, 300)
    report(client, job.bob, job.bob_task, status="failed", reason="boom")
    listed = client.get(f"{API}/jobs/{job.id}/checkpoints", headers=ADMIN).json()
    assert [(c["step"], c["rank"]) for c in listed] == [
        (100, 0),
        (100, 1),
        (200, 0),
        (200, 1),
        (300, 0),
    ]
    incomplete = client.post(f"{API}/jobs/{job.id}/retry", json={"step": 300}, headers=ADMIN)
    assert incomplete.status_code == 422 and incomplete.json()["code"] == "unknown_checkpoint"
    retried = client.post(f"{API}/jobs/{job.id}/retry", headers=ADMIN).json()
    assert retried["attempts"][1]["resume_from"] == {"step": 200, "uri": "ck/200/0"}
    assert retried["status_reason"] == "waiting for placement"


def test_retry_from_a_named_checkpoint(client: TestClient) -> None:
    job = running_job(client)
    for step in (100, 200):
        checkpoint(client, job, job.alice, job.alice_task, 0, step)
        checkpoint(client, job, job.bob, job.bob_task, 1, step)
    report(client, job.bob, job.bob_task, status="failed", reason="boom")
    retried = client.post(f"{API}/jobs/{job.id}/retry", json={"step": 100}, headers=ADMIN)
    assert retried.json()["attempts"][1]["resume_from"] == {"step": 100, "uri": "ck/100/0"}
