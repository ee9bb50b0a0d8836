"""A deployment as an operator runs one: ``tessera api`` and one ``tessera worker`` per party,
each its own process, on PostgreSQL and Redis, so each can be stopped, killed and restarted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.platform import JobWatch

ADMIN_TOKEN = "outage-admin-token-0123456789"


@dataclass
class Deployment(JobWatch):
    home: Path
    port: int
    database_url: str
    broker_url: str
    api: subprocess.Popen[bytes] | None = None
    replicas: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    """More ``tessera api`` processes on the same database, by port (``start_replica``)."""
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _env(self) -> dict[str, str]:
        root = Path(__file__).resolve().parents[2]
        return {
            **os.environ,
            "TESSERA_HOME": str(self.home),
            "PYTHONPATH": str(root),
        }

    def _start_api(self, port: int, log_name: str) -> subprocess.Popen[bytes]:
        env = self._env() | {
            "TESSERA_DATABASE_URL": self.database_url,
            "TESSERA_BROKER_URL": self.broker_url,
            "TESSERA_ADMIN_TOKEN": ADMIN_TOKEN,
        }
        argv = [sys.executable, "-m", "tessera_api.cli", "api", "--port", str(port)]
        with (self.home / log_name).open("ab") as log:
            return subprocess.Popen(argv, env=env, stdout=log, stderr=log)

    def start_api(self) -> None:
        """The replica at ``port``, the one the workers and ``call`` talk to."""
        self.api = self._start_api(self.port, "api.out")

    def start_replica(self, port: int) -> subprocess.Popen[bytes]:
        self.replicas[port] = self._start_api(port, f"api-{port}.out")
        return self.replicas[port]

    def wait_serving(self, timeout_s: float = 60, port: int | None = None) -> float:
        """Seconds until the replica at ``port`` (default: the main one) answers."""
        port = port or self.port
        proc = self.api if port == self.port else self.replicas[port]
        started = time.monotonic()
        while True:
            try:
                url = f"http://127.0.0.1:{port}/api/v1/health"
                if httpx.get(url, timeout=1).status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            assert proc is not None and proc.poll() is None, self.log("api.out")
            assert time.monotonic() - started < timeout_s, "the API did not come up"
            time.sleep(0.1)

    def stop_api(self) -> None:
        assert self.api is not None
        self.api.send_signal(signal.SIGTERM)
        self.api.wait(30)

    def log(self, name: str) -> str:
        path = self.home / name
        return path.read_text()[-3000:] if path.exists() else ""

    def logs(self) -> str:
        """The end of every process's log, for assertion messages."""
        return "\n".join(
            f"--- {p.name}\n{self.log(p.name)}" for p in sorted(self.home.glob("*.out"))
        )

    def call(self, method: str, path: str, body: Any = None, token: str = ADMIN_TOKEN) -> Any:
        response = httpx.request(
            method,
            f"{self.url}/api/v1{path}",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code < 300, response.text
        return response.json() if response.content else None

    def add_party(self, name: str) -> None:
        self.tokens[name] = self.call("POST", "/parties", {"name": name})["token"]
        policy = {"auto_approve_from": ["admin"], "algorithms": None, "custom_code": False}
        self.call("PUT", f"/parties/{name}/policy", policy, token=self.tokens[name])

    def start_worker(self, party: str) -> subprocess.Popen[bytes]:
        token_file = self.home / f"{party}.token"
        token_file.write_text(self.tokens[party])
        argv = [sys.executable, "-m", "tessera_api.cli", "worker", "--party", party]
        argv += ["--api", self.url, "--broker", self.broker_url, "--hostname", f"host-{party}"]
        argv += ["--token-file", str(token_file), "--heartbeat", "1"]
        with (self.home / f"worker-{party}.out").open("ab") as log:
            proc = subprocess.Popen(argv, env=self._env(), stdout=log, stderr=log)
        self.workers[party] = proc
        return proc

    def online(self) -> set[str]:
        return {w["party"] for w in self.call("GET", "/workers")["data"] if w["online"]}

    def wait_online(self, *parties: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not set(parties) <= self.online():
            assert time.monotonic() < deadline, f"workers of {parties} did not come online"
            time.sleep(0.2)

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.call("GET", f"/jobs/{job_id}")
        return result

    def create_job(self, parties: list[str], **config: Any) -> str:
        body = {
            "name": "outage",
            "algorithm": "ddp",
            "config": {"eval_interval": 0, "batch_size": 8, **config},
            "assignments": [{"party": p, "role": "trainer"} for p in parties],
        }
        return str(self.call("POST", "/jobs", body)["id"])

    def stop(self) -> None:
        procs = [*self.workers.values(), *self.replicas.values(), *([self.api] if self.api else [])]
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
