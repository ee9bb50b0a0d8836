"""Job digests (attempts and final metrics of many jobs at once, only of jobs the caller sees)
and the times of a job's steps."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.backend.factories import ADMIN, API, create_party, running_job


def test_digests_hold_attempts_and_the_final_metrics_of_the_lowest_rank(
    client: TestClient,
) -> None:
    job = running_job(client)
    other = running_job(client)
    alice = [
        {"rank": 0, "name": "loss", "step": 5, "value": 0.3},
        {"rank": 0, "name": "accuracy", "step": 5, "value": 0.75},
        {"rank": 0, "name": "bytes_sent.to.1", "step": 5, "value": 100.0},
    ]
    bob = [
        {"rank": 1, "name": "loss", "step": 1, "value": 0.9},
        {"rank": 1, "name": "loss", "step": 5, "value": 0.4},
    ]
    for party, task, points in ((job.alice, job.alice_task, alice), (job.bob, job.bob_task, bob)):
        body = {"task_id": task, "points": points}
        posted = client.post(f"{API}/jobs/{job.id}/metrics", json=body, headers=party.auth)
        assert posted.status_code == 204, posted.text

    asked = f"{API}/job-digests?ids={other.id}&ids={job.id}&ids=missing"
    digests = client.get(asked, headers=ADMIN).json()
    assert [d["id"] for d in digests] == [other.id, job.id]
    assert digests[0] == {"id": other.id, "attempts": 1, "metrics": {}}
    assert digests[1]["attempts"] == 1
    assert digests[1]["metrics"] == {
        "accuracy": {"value": 0.75, "step": 5, "rank": 0},
        "loss": {"value": 0.3, "step": 5, "rank": 0},
    }

    stranger = create_party(client)
    assert client.get(asked, headers=stranger.auth).json() == []
    own = client.get(asked, headers=job.alice.auth).json()
    assert [d["id"] for d in own] == [job.id]


def test_digests_need_ids_and_take_at_most_a_hundred(client: TestClient) -> None:
    assert client.get(f"{API}/job-digests", headers=ADMIN).status_code == 422
    many = "&".join(f"ids=j{i}" for i in range(101))
    assert client.get(f"{API}/job-digests?{many}", headers=ADMIN).status_code == 422


def test_step_times_are_the_first_report_of_each_step_thinned_evenly(client: TestClient) -> None:
    job = running_job(client)
    empty = client.get(f"{API}/jobs/{job.id}/step-times", headers=ADMIN).json()
    assert empty == {"attempt": 1, "points": []}

    def at(rank: int, step: int, second: int) -> dict[str, object]:
        time = f"2026-11-24T08:00:{second:02d}+00:00"
        return {"rank": rank, "name": "loss", "step": step, "value": 1.0, "time": time}

    sent = (
        (job.alice, job.alice_task, [at(0, s, 10 + 2 * s) for s in range(1, 6)]),
        (job.bob, job.bob_task, [at(1, s, 11 + 2 * s) for s in range(1, 6)] + [at(1, 1, 5)]),
    )
    for party, task, points in sent:
        body = {"task_id": task, "points": points}
        posted = client.post(f"{API}/jobs/{job.id}/metrics", json=body, headers=party.auth)
        assert posted.status_code == 204, posted.text

    read = client.get(f"{API}/jobs/{job.id}/step-times", headers=job.bob.auth).json()
    assert read["attempt"] == 1
    assert [(p["step"], p["time"][17:19]) for p in read["points"]] == [
        (1, "05"),
        (2, "14"),
        (3, "16"),
        (4, "18"),
        (5, "20"),
    ]
    thinned = client.get(f"{API}/jobs/{job.id}/step-times?max_points=3", headers=ADMIN).json()
    assert [p["step"] for p in thinned["points"]] == [1, 3, 5]
