"""A running Tessera for end-to-end tests: ``tessera up`` on PostgreSQL and Redis, over HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ADMIN_TOKEN = "e2e-admin-token-0123456789"
CONTROL_PLANE_ONLY = ("TESSERA_ADMIN_TOKEN", "TESSERA_DATABASE_URL")


def running_everywhere(job: dict[str, Any]) -> bool:
    """Every task of the job's last attempt runs its ranks."""
    tasks = job["attempts"][-1]["tasks"] if job["attempts"] else []
    return bool(tasks) and all(t["status"] == "running" for t in tasks)


def why(job: dict[str, Any]) -> str:
    """A job's status with the reasons its attempts and tasks gave, for assertion messages."""
    lines = [f"{job['status']}: {job.get('status_reason', '')}"]
    for attempt in job.get("attempts", []):
        lines.append(
            f"  attempt {attempt['number']} {attempt['status']}"
            f" {attempt['failure_code']} {attempt['failure_reason']}"
        )
        for task in attempt["tasks"]:
            lines.append(
                f"    task {task['party']} {task['status']} exit={task['exit_code']}"
                f" rank={task['failed_rank']} {task['reason']}"
            )
    return "\n".join(lines)


class JobWatch:
    """Waiting on a job through the API, for anything that can ``job(job_id)``."""

    def job(self, job_id: str) -> dict[str, Any]:
        raise NotImplementedError

    def wait_job(
        self, job_id: str, until: Callable[[dict[str, Any]], bool], timeout_s: float = 120
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.job(job_id)
            if until(job):
                return job
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} did not get there: {why(job)}")
            time.sleep(0.2)


@dataclass
class Platform(JobWatch):
    url: str
    home: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    extra: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.http = httpx.Client(
            base_url=self.url + "/api/v1",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=30,
        )

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: Any = None) -> Any:
        response = self.http.post(path, json=body)
        assert response.status_code < 300, response.text
        return response.json() if response.content else None

    def create_job(self, parties: list[str], **config: Any) -> str:
        body = {
            "name": "e2e",
            "algorithm": "ddp",
            "config": {"eval_interval": 0, "batch_size": 8, "log_interval": 5, **config},
            "assignments": [{"party": p, "role": "trainer"} for p in parties],
        }
        return str(self.post("/jobs", body)["id"])

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.get(f"/jobs/{job_id}")
        return result

    def wait_status(self, job_id: str, *statuses: str, timeout_s: float = 120) -> dict[str, Any]:
        return self.wait_job(job_id, lambda j: j["status"] in statuses, timeout_s)

    def online_parties(self) -> set[str]:
        workers = self.get("/workers")["data"]
        return {w["party"] for w in workers if w["online"]}

    def token(self, party: str) -> str:
        return (self.home / "tokens" / f"{party}.token").read_text().strip()

    def start_worker(self, party: str) -> subprocess.Popen[bytes]:
        """A worker as a party's host runs it: the token in a file, no control-plane secret."""
        env = {k: v for k, v in self.env.items() if k not in CONTROL_PLANE_ONLY}
        argv = [sys.executable, "-m", "tessera_api.cli", "worker", "--party", party]
        token_file = self.home / "tokens" / f"{party}.token"
        with (self.home / f"worker-{party}.out").open("ab") as log:
            proc = subprocess.Popen(
                [*argv, "--api", self.url, "--token-file", str(token_file)],
                env=env,
                stdout=log,
                stderr=log,
            )
        self.extra.append(proc)
        return proc

    def stop(self) -> None:
        for proc in [*self.extra, self.process]:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in [*self.extra, self.process]:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.http.close()


def start_platform(
    home: Path, port: int, *, database_url: str, broker_url: str, parties: str, workers: str
) -> Platform:
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env.update(
        TESSERA_HOME=str(home),
        TESSERA_DATABASE_URL=database_url,
        TESSERA_BROKER_URL=broker_url,
        TESSERA_ADMIN_TOKEN=ADMIN_TOKEN,
        TESSERA_WORKER_OFFLINE_AFTER_S="10",
        PYTHONPATH=str(root),
    )
    argv = [sys.executable, "-m", "tessera_api.cli", "up", "--port", str(port)]
    with (home / "up.out").open("ab") as log:
        process = subprocess.Popen(
            [*argv, "--parties", parties, "--workers", workers], env=env, stdout=log, stderr=log
        )
    platform = Platform(f"http://127.0.0.1:{port}", home, env, process)
    expected = set(workers.split(","))
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"tessera up exited: {(home / 'up.out').read_text()[-3000:]}")
        try:
            if expected <= platform.online_parties():
                return platform
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            platform.stop()
            raise RuntimeError(f"workers did not come online: {(home / 'up.out').read_text()}")
        time.sleep(0.5)
