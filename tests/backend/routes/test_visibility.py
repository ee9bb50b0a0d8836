"""Each role reads only the metrics its algorithm lets it see of other parties' ranks.

The test spec ``split`` gives its feature role ``OPERATIONAL_METRICS`` (step times, bytes,
system metrics) and its middle and label roles every metric, as ``split_nn`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi.testclient import TestClient

from tessera_ml.spec import sees_metric
from tests.backend.factories import (
    ADMIN,
    API,
    PartyRef,
    create_job,
    create_party,
    register_worker,
    start,
)
from tests.backend.routes.test_events import parse


@dataclass
class SplitJob:
    id: str
    feature: PartyRef
    middle: PartyRef
    label: PartyRef
    tasks: dict[str, str]


def split_job(client: TestClient) -> SplitJob:
    feature, middle, label = create_party(client), create_party(client), create_party(client)
    parties = {"feature": feature, "middle": middle, "label": label}
    job = create_job(
        client,
        [{"party": p.name, "role": role} for role, p in parties.items()],
        algorithm="split",
    )
    workers = {p.name: (register_worker(client, p), [i]) for i, p in enumerate(parties.values())}
    task_ids = start(client, job["id"], workers)
    tasks = dict(zip(parties, task_ids, strict=True))
    # rank 0 is the feature party's, rank 1 the middle's, rank 2 the label party's
    for role, rank, names in (
        ("feature", 0, ("step_time_s", "bytes_sent", "feature_norm")),
        ("middle", 1, ("step_time_s", "bytes_sent")),
        ("label", 2, ("loss", "accuracy", "step_time_s", "bytes_sent.to.0", "cpu_percent")),
    ):
        points = [
            {"rank": rank, "name": n, "step": s, "value": 0.5 + s} for n in names for s in range(3)
        ]
        response = client.post(
            f"{API}/jobs/{job['id']}/metrics",
            json={"task_id": tasks[role], "points": points},
            headers=parties[role].auth,
        )
        assert response.status_code == 204, response.text
        lines = [{"rank": rank, "level": "info", "message": f"{role} step 2 loss 0.5"}]
        response = client.post(
            f"{API}/jobs/{job['id']}/logs",
            json={"task_id": tasks[role], "lines": lines},
            headers=parties[role].auth,
        )
        assert response.status_code == 204, response.text
    return SplitJob(job["id"], feature, middle, label, tasks)


def series(client: TestClient, job: SplitJob, headers: dict[str, str]) -> set[tuple[str, int]]:
    response = client.get(f"{API}/jobs/{job.id}/metrics", headers=headers)
    assert response.status_code == 200, response.text
    return {(s["name"], s["rank"]) for s in response.json()["series"]}


def test_a_role_reads_only_the_metrics_it_may_see_of_others(client: TestClient) -> None:
    job = split_job(client)
    everything = series(client, job, ADMIN)
    assert ("loss", 2) in everything and ("feature_norm", 0) in everything
    assert series(client, job, job.label.auth) == everything
    assert series(client, job, job.middle.auth) == everything
    # the feature party: its own rank's every metric, of others only how they run
    assert series(client, job, job.feature.auth) == {
        ("step_time_s", 0),
        ("bytes_sent", 0),
        ("feature_norm", 0),
        ("step_time_s", 1),
        ("bytes_sent", 1),
        ("step_time_s", 2),
        ("bytes_sent.to.0", 2),
        ("cpu_percent", 2),
    }
    asked = client.get(f"{API}/jobs/{job.id}/metrics?names=loss", headers=job.feature.auth)
    assert asked.status_code == 200 and asked.json()["series"] == []


def test_the_event_stream_cuts_what_a_role_may_not_see(client: TestClient) -> None:
    job = split_job(client)

    def metric_events(headers: dict[str, str]) -> list[dict[str, Any]]:
        response = client.get(f"{API}/jobs/{job.id}/events?once=true", headers=headers)
        assert response.status_code == 200
        return [e for e in parse(response.text) if e["event"] == "metrics"]

    full = metric_events(ADMIN)
    assert [e["party"] for e in full] == [job.feature.name, job.middle.name, job.label.name]
    assert full[2]["last"]["loss"] == 2.5
    seen = metric_events(job.feature.auth)
    assert [e["party"] for e in seen] == [e["party"] for e in full]
    assert seen[0] == full[0]  # its own rank's summary, whole
    assert seen[2]["names"] == ["bytes_sent.to.0", "cpu_percent", "step_time_s"]
    assert set(seen[2]["last"]) == set(seen[2]["names"])
    assert metric_events(job.label.auth) == full


def test_digests_and_logs_follow_the_same_sight(client: TestClient) -> None:
    job = split_job(client)

    def final(headers: dict[str, str]) -> dict[str, Any]:
        response = client.get(f"{API}/job-digests?ids={job.id}", headers=headers)
        assert response.status_code == 200, response.text
        [digest] = response.json()
        metrics: dict[str, Any] = digest["metrics"]
        return metrics

    assert {"loss", "accuracy", "feature_norm"} <= set(final(ADMIN))
    assert final(job.label.auth) == final(ADMIN)
    feature_sees = final(job.feature.auth)
    assert "loss" not in feature_sees and "accuracy" not in feature_sees
    assert feature_sees["feature_norm"]["rank"] == 0 and "step_time_s" in feature_sees

    def log_lines(headers: dict[str, str]) -> list[str]:
        response = client.get(f"{API}/jobs/{job.id}/logs", headers=headers)
        assert response.status_code == 200, response.text
        return [line["message"] for line in response.json()["data"]]

    assert len(log_lines(ADMIN)) == 3 and log_lines(job.middle.auth) == log_lines(ADMIN)
    assert log_lines(job.feature.auth) == ["feature step 2 loss 0.5"]
    other_task = client.get(
        f"{API}/jobs/{job.id}/logs?task_id={job.tasks['label']}", headers=job.feature.auth
    )
    assert other_task.status_code == 200 and other_task.json()["data"] == []


def test_the_docs_table_says_what_each_algorithm_lets_each_role_see() -> None:
    from pathlib import Path

    from tessera_ml.registry import all_specs

    text = (Path(__file__).resolve().parents[3] / "docs" / "metrics.md").read_text()
    rows = text.split("## Who reads which metrics", 1)[1].splitlines()
    specs = all_specs()
    documented: dict[str, tuple[set[str], set[str]]] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        for name in (n.strip().strip("`") for n in cells[0].split(",")):
            roles = {r.name for r in specs[name].roles}
            every = roles if cells[1] == "every role" else set(cells[1].split("`")[1::2])
            documented[name] = (every, set(cells[2].split("`")[1::2]))
    assert set(documented) == set(specs)
    for name, spec in specs.items():
        every = {r.name for r in spec.roles if r.sees_all_metrics}
        limited = {r.name for r in spec.roles if not r.sees_all_metrics}
        assert documented[name] == (every, limited), name
        for role in spec.roles:
            # what results a limited role may not read: every spec's outcome metrics
            if not role.sees_all_metrics:
                assert not any(
                    sees_metric(role.sees_metrics, m) for m in ("loss", "eval_loss", "accuracy")
                ), (name, role.name)
