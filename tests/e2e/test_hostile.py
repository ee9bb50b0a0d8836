"""The trust boundary, tried as a hostile party would, on a real ``tessera up`` with real workers.

Alice plays the attacker throughout: she holds a role in her jobs and her own token, and tries
to make another party's worker run her code, to read secrets out of ranks, to talk to a running
job's rendezvous store without being one of its ranks, and to answer for other parties. Bob's
worker runs; carol has none (another test file waits for her to have none at first).
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.platform import ADMIN_TOKEN, Platform
from tests.worker.proc_scan import pids_with, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow, pytest.mark.serial]


def as_party(platform: Platform, party: str) -> httpx.Client:
    return httpx.Client(
        base_url=platform.url + "/api/v1",
        headers={"Authorization": f"Bearer {platform.token(party)}"},
        timeout=30,
    )


@contextmanager
def policy(platform: Platform, party: str, **changes: Any) -> Iterator[None]:
    """``party``'s policy with ``changes`` for the duration, then as it was."""
    with as_party(platform, party) as client:
        before = client.get(f"/parties/{party}/policy").json()
        response = client.put(f"/parties/{party}/policy", json={**before, **changes})
        assert response.status_code == 200, response.text
        try:
            yield
        finally:
            client.put(f"/parties/{party}/policy", json=before)


def custom_job(marker: Path, parties: list[str]) -> dict[str, Any]:
    """The reproduction: a model 'factory' that is any importable callable, here a command."""
    target = {
        "kind": "custom",
        "target": "subprocess:run",
        "kwargs": {"args": ["touch", str(marker)]},
    }
    return {
        "name": "hostile",
        "algorithm": "ddp",
        "config": {"steps": 3, "eval_interval": 0, "model": target},
        "assignments": [{"party": p, "role": "trainer"} for p in parties],
    }


def test_code_for_another_party_is_refused_naming_that_party(
    platform: Platform, tmp_path: Path
) -> None:
    marker = tmp_path / "carol-was-here"
    with policy(platform, "alice", custom_code=True), as_party(platform, "alice") as alice:
        response = alice.post("/jobs", json=custom_job(marker, ["alice", "carol"]))

    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "custom_code_not_allowed"
    assert problem["detail"].endswith("the policy of party carol does not allow custom code")
    assert not marker.exists()


def test_a_worker_imports_no_code_outside_its_own_allow_list(
    platform: Platform, tmp_path: Path
) -> None:
    marker = tmp_path / "bob-was-here"
    with (
        policy(platform, "alice", custom_code=True),
        policy(platform, "bob", custom_code=True),
        as_party(platform, "alice") as alice,
    ):
        created = alice.post("/jobs", json=custom_job(marker, ["alice", "bob"]))
        assert created.status_code == 201, created.text
        job = platform.wait_status(created.json()["id"], "failed", "succeeded", timeout_s=90)

    assert job["status"] == "failed", job
    reasons = " ".join(t["reason"] or "" for t in job["attempts"][-1]["tasks"])
    assert "'subprocess:run'" in reasons and "does not allow" in reasons
    assert "--allow-custom" in reasons
    assert not marker.exists()


def _secrets(platform: Platform) -> list[bytes]:
    tokens = [platform.token(p).encode() for p in ("alice", "bob", "carol")]
    return [*tokens, ADMIN_TOKEN.encode(), b"TESSERA_PARTY_TOKEN", b"TESSERA_ADMIN_TOKEN"]


def test_no_rank_and_no_worker_holds_a_token_of_a_party_or_the_admin(platform: Platform) -> None:
    job_id = platform.create_job(["alice", "bob"], steps=10_000_000)
    job = platform.wait_job(
        job_id, lambda j: all(t["status"] == "running" for t in j["attempts"][-1]["tasks"])
    )
    tasks = job["attempts"][-1]["tasks"]
    ranks = [pid for t in tasks for pid in wait_for(f"logs/{t['id']}/rank-", 1, 60)]
    workers = pids_with("worker --party")
    try:
        assert len(ranks) == 2 and len(workers) >= 2
        secrets = _secrets(platform)
        for pid in ranks + workers:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            leaked = [s for s in secrets if s in environ or s in cmdline]
            assert leaked == [], (pid, leaked)
        for task in tasks:
            for spec in (platform.home / "logs" / task["id"]).glob("rank-*.json"):
                assert spec.stat().st_mode & 0o077 == 0
                assert not any(s in spec.read_bytes() for s in secrets[:4])
    finally:
        platform.post(f"/jobs/{job_id}/cancel")
        platform.wait_status(job_id, "cancelled", "failed", timeout_s=30)


def _store_of(platform: Platform, job_id: str) -> tuple[str, int]:
    """Where rank 0 serves the running job's store, once it accepts connections."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for task in platform.job(job_id)["attempts"][-1]["tasks"]:
            point = platform.get(f"/tasks/{task['id']}")["rendezvous"]
            if point is None:
                continue
            try:
                socket.create_connection((point["host"], point["port"]), timeout=1).close()
            except OSError:
                continue
            return point["host"], point["port"]
        time.sleep(0.2)
    raise AssertionError("the job's store never accepted a connection")


def _closed_on(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1024) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def test_a_stranger_at_a_running_jobs_store_learns_and_changes_nothing(
    platform: Platform,
) -> None:
    import torch.distributed as dist

    job_id = platform.create_job(["alice", "bob"], steps=400, log_interval=50)
    host, port = _store_of(platform, job_id)

    silent = socket.create_connection((host, port))  # stays connected, says nothing
    plain = socket.create_connection((host, port))
    plain.sendall(b"\x00" * 64)  # not TLS: a TCPStore-style request
    assert _closed_on(plain)
    anonymous = ssl.create_default_context()
    anonymous.check_hostname = False
    anonymous.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((host, port)) as raw,
        pytest.raises((ssl.SSLError, ConnectionError, OSError)),
        anonymous.wrap_socket(raw) as tls,  # no client certificate
    ):
        tls.sendall(b"\x00\x00\x00\x01\x08")
        if _closed_on(tls):
            raise ConnectionError("closed without an answer")
    with pytest.raises((RuntimeError, ValueError, TimeoutError)):
        dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=3))

    done = platform.wait_status(job_id, "succeeded", "failed", "cancelled", timeout_s=180)
    silent.close()
    plain.close()

    assert done["status"] == "succeeded", done
    series = platform.get(f"/jobs/{job_id}/metrics", names="loss")["series"]
    assert {s["rank"]: s["points"][-1]["step"] for s in series} == {0: 400, 1: 400}


def test_a_party_answers_only_for_itself(platform: Platform) -> None:
    with policy(platform, "bob", auto_approve_from=[]), as_party(platform, "alice") as alice:
        body = {
            "name": "consent",
            "algorithm": "ddp",
            "config": {"steps": 5, "eval_interval": 0},
            "assignments": [{"party": p, "role": "trainer"} for p in ("alice", "bob")],
        }
        job = alice.post("/jobs", json=body).json()
        assert job["status_reason"] == "waiting for approval by bob"

        with as_party(platform, "carol") as carol:
            assert carol.post(f"/jobs/{job['id']}/approve").status_code == 404
        assert alice.post(f"/jobs/{job['id']}/approve").json()["waiting_for"] == ["bob"]
        time.sleep(1.0)
        assert platform.job(job["id"])["status"] == "pending"  # nothing ran meanwhile
        assert platform.job(job["id"])["attempts"][-1]["tasks"] == []

        with as_party(platform, "bob") as bob:
            assert bob.post(f"/jobs/{job['id']}/approve").status_code == 200
        done = platform.wait_status(job["id"], "succeeded", "failed", timeout_s=90)
    assert done["status"] == "succeeded", done
