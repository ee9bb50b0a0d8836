"""A job's page in headless Chromium while the control plane is stopped and started again.

Starts ``tessera up`` without workers (SQLite in a temporary home), creates a job through the API
(it stays queued: no worker takes it) and runs ``frontend/e2e/restart.mjs``, which opens the job's
page and then, driven over its stdin and stdout: the server stops (SIGTERM), the page shows the
connection banner and keeps the job; the server starts again on the same port and home, the banner
goes, the live updates resume, and the job's cancellation shows without a reload; and no console
error but the refused connections while the server was down.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from tessera_ml.worlds import free_port
from tests.browser.test_dashboard import (
    CHROMIUM,
    FRONTEND,
    TOKEN,
    require_browser,
    start_tessera,
    stop_tessera,
)

pytestmark = [pytest.mark.browser, pytest.mark.serial]

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def _wait_until_serving(base: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"tessera up exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{base}/api/v1/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"tessera up did not serve:\n{log.read_text()}")


class Script:
    """The node script, its output read line by line in a thread so that waits can time out."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            ["node", "e2e/restart.mjs"],
            cwd=FRONTEND,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.output: list[str] = []
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, word: str, timeout: float = 120) -> None:
        """Until the script prints ``word`` on a line of its own."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no {word!r} from the script in {timeout} s:\n{self.text}")
            if line is None:
                pytest.fail(f"the script ended before {word!r}:\n{self.text}")
            if line == word:
                return

    def say(self, line: str) -> None:
        """Writes a line to the script; one that has already ended (a failed check) is let be."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass

    @property
    def text(self) -> str:
        return "".join(self.output)


def test_job_page_survives_a_server_restart(tmp_path: Path) -> None:
    require_browser()
    home = tmp_path / "home"
    home.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_tessera(home, port, parties="alice,bob", workers="none")
    script: Script | None = None
    try:
        _wait_until_serving(base, server, home / "up.log")
        job = httpx.post(
            f"{base}/api/v1/jobs",
            headers=HEADERS,
            json={
                "name": "e2e-restart",
                "algorithm": "ddp",
                "config": {"steps": 30},
                "assignments": [{"party": "alice", "role": "trainer"}],
            },
            timeout=10,
        )
        assert job.status_code == 201, job.text
        script = Script(
            {
                **os.environ,
                "BASE_URL": base,
                "ADMIN_TOKEN": TOKEN,
                "CHROMIUM": CHROMIUM,
                "JOB_ID": job.json()["id"],
            }
        )
        script.wait_for("STOP")
        began = time.monotonic()
        stop_tessera(server)
        assert server.returncode == 0, (home / "up.log").read_text()
        print(f"stopped in {time.monotonic() - began:.1f} s")
        script.say("stopped")
        script.wait_for("DOWN")
        began = time.monotonic()
        server = start_tessera(home, port, parties="alice,bob", workers="none")
        _wait_until_serving(base, server, home / "up.log")
        print(f"serving again in {time.monotonic() - began:.1f} s")
        script.say("restarted")
        try:
            script.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the script did not finish:\n{script.text}")
        print(script.text)
        assert script.proc.returncode == 0, script.text
        assert "5 passed, 0 failed" in script.text
    finally:
        if script is not None and script.proc.poll() is None:
            script.proc.kill()
            script.proc.wait()
        stop_tessera(server)
