"""Checkpoint files: a worker that shares them uploads each after its record, through the
worker's own client and reporter; only the party whose rank wrote one (and the admin) downloads
it, byte for byte; bytes that do not match the record, or too many, are refused and not kept."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tessera_worker.client import ApiError, ControlPlane
from tessera_worker.reporter import HttpReporter
from tests.backend.factories import ADMIN, API, PartyRef, RunningJob, running_job


def write_checkpoint(root: Path, step: int, rank: int, payload: bytes) -> dict[str, Any]:
    """A checkpoint's folder as ``RankContext.save_checkpoint`` leaves it, and its record."""
    folder = root / f"step-{step:09d}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"rank-{rank}.pt").write_bytes(payload)
    return {
        "rank": rank,
        "step": step,
        "uri": str(folder),
        "size": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }


def worker_client(client: TestClient, party: PartyRef) -> ControlPlane:
    return ControlPlane(str(client.base_url), party.token, http=client)


def file_url(job: RunningJob, step: int, rank: int, attempt: int = 1) -> str:
    return f"{API}/jobs/{job.id}/checkpoints/{attempt}/{step}/{rank}/file"


def test_a_shared_checkpoint_goes_to_its_party_only(client: TestClient, tmp_path: Path) -> None:
    job = running_job(client)
    payload = bytes(range(256)) * 5000  # 1.28 MB: several chunks on the wire
    reporter = HttpReporter(
        worker_client(client, job.alice),
        job_id=job.id,
        task_id=job.alice_task,
        rank=0,
        flush_interval_s=0.05,
        share_files_of=1,
        files_in=tmp_path / "alice",
    )
    record = write_checkpoint(tmp_path / "alice", 40, 0, payload)
    reporter.checkpoint(40, record["uri"], record["size"], record["sha256"])
    assert reporter.close(timeout_s=10)
    # bob records his rank's checkpoint without sharing its file
    bob_record = write_checkpoint(tmp_path / "bob", 40, 1, b"bob's state")
    worker_client(client, job.bob).post_checkpoint(job.id, {"task_id": job.bob_task, **bob_record})

    listed = client.get(f"{API}/jobs/{job.id}/checkpoints", headers=job.bob.auth).json()
    assert [(c["rank"], c["party"], c["shared"]) for c in listed] == [
        (0, job.alice.name, True),
        (1, job.bob.name, False),
    ]
    # alice's record names the checkpoint inside her job's folder, not where her host keeps it
    assert listed[0]["uri"] == "step-000000040"
    mine = client.get(file_url(job, 40, 0), headers=job.alice.auth)
    assert mine.status_code == 200 and mine.content == payload
    assert mine.headers["x-checkpoint-sha256"] == record["sha256"]
    assert "attachment" in mine.headers["content-disposition"]
    assert client.get(file_url(job, 40, 0), headers=ADMIN).content == payload
    theirs = client.get(file_url(job, 40, 0), headers=job.bob.auth)
    assert theirs.status_code == 403 and b"payload" not in theirs.content
    kept = client.get(file_url(job, 40, 1), headers=job.bob.auth)
    assert kept.status_code == 404 and kept.json()["code"] == "checkpoint_not_shared"
    assert client.get(file_url(job, 41, 0), headers=job.alice.auth).status_code == 404
    assert client.get(file_url(job, 40, 0, attempt=2), headers=job.alice.auth).status_code == 404


def test_bytes_that_do_not_match_the_record_are_refused(client: TestClient, tmp_path: Path) -> None:
    job = running_job(client)
    api = worker_client(client, job.alice)
    record = write_checkpoint(tmp_path, 7, 0, b"the state as recorded")
    upload = {"upload": str(Path(record["uri"]) / "rank-0.pt"), "attempt": 1}
    with pytest.raises(ApiError) as before:  # no record yet: nothing to match
        api.post_checkpoint(job.id, {"task_id": job.alice_task, **record, **upload})
    assert before.value.status == 404
    api.post_checkpoint(job.id, {"task_id": job.alice_task, **record})
    (Path(record["uri"]) / "rank-0.pt").write_bytes(b"the state, changed after")
    with pytest.raises(ApiError) as changed:  # bytes that differ from the record
        api.post_checkpoint(job.id, {"task_id": job.alice_task, **record, **upload})
    assert (changed.value.status, changed.value.code) == (422, "checkpoint_mismatch")
    assert client.get(file_url(job, 7, 0), headers=ADMIN).json()["code"] == "checkpoint_not_shared"
    # a task uploads only for itself
    foreign = client.put(
        file_url(job, 7, 0),
        params={"task_id": job.alice_task},
        content=b"x",
        headers=job.bob.auth,
    )
    assert foreign.status_code == 403


def test_a_file_over_the_limit_is_refused_and_not_kept(client: TestClient, tmp_path: Path) -> None:
    job = running_job(client)
    app: Any = client.app
    app.state.settings.max_checkpoint_file_bytes = 1000
    api = worker_client(client, job.alice)
    record = write_checkpoint(tmp_path, 3, 0, b"z" * 5000)
    api.post_checkpoint(job.id, {"task_id": job.alice_task, **record})
    upload = {"upload": str(Path(record["uri"]) / "rank-0.pt"), "attempt": 1}
    with pytest.raises(ApiError) as too_large:
        api.post_checkpoint(job.id, {"task_id": job.alice_task, **record, **upload})
    assert (too_large.value.status, too_large.value.code) == (413, "checkpoint_too_large")
    stored = app.state.settings.resolved_artifacts_dir / job.id
    assert not [p for p in stored.rglob("*") if p.is_file()]


def test_exports_and_models_download_by_kind_and_never_resume(
    client: TestClient, tmp_path: Path
) -> None:
    job = running_job(client)
    for party, task, rank in ((job.alice, job.alice_task, 0), (job.bob, job.bob_task, 1)):
        api = worker_client(client, party)
        for kind, step in (("checkpoint", 4), ("export", 8)):
            folder = tmp_path / party.name / kind
            record = write_checkpoint(folder, step, rank, f"{kind} of rank {rank}".encode())
            body = {"task_id": task, **record} | ({} if kind == "checkpoint" else {"kind": kind})
            api.post_checkpoint(job.id, body)
            upload = {"upload": str(Path(record["uri"]) / f"rank-{rank}.pt"), "attempt": 1}
            api.post_checkpoint(job.id, body | upload)
    listed = client.get(f"{API}/jobs/{job.id}/checkpoints", headers=ADMIN).json()
    assert [(c["kind"], c["step"], c["rank"], c["shared"]) for c in listed] == [
        ("checkpoint", 4, 0, True),
        ("checkpoint", 4, 1, True),
        ("export", 8, 0, True),
        ("export", 8, 1, True),
    ]
    export = client.get(file_url(job, 8, 0), params={"kind": "export"}, headers=job.alice.auth)
    assert export.status_code == 200 and export.content == b"export of rank 0"
    assert "export-step8-rank0" in export.headers["content-disposition"]
    assert client.get(file_url(job, 8, 0), headers=job.alice.auth).status_code == 404
    # a retry resumes from checkpoints only, never from a later export
    response = client.post(
        f"{API}/tasks/{job.bob_task}/status",
        json={"status": "failed", "reason": "boom"},
        headers=job.bob.auth,
    )
    assert response.status_code == 200, response.text
    retried = client.post(f"{API}/jobs/{job.id}/retry", headers=ADMIN).json()
    assert retried["attempts"][1]["resume_from"]["step"] == 4
