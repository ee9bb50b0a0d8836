"""The dashboard in headless Chromium against a real control plane and real local workers.

Starts ``tessera up`` (API, dashboard, workers for alice, bob and dave, embedded broker; carol is
a party without a worker) and runs ``frontend/e2e/dashboard.mjs``: sign in, a validation error for
a bad configuration, a job created through the form that succeeds with points on its loss chart,
its page (overview, final metrics, roles, the configuration's changes, no Retry), run again with
changes, a nested field's error at that field, every algorithm accepted with the form's own
defaults, a cancelled job whose logs say so in one line per rank, a split_nn job whose logs hold
every rank's lines (filtered by party and level) with the bytes between parties, an mpc_mixed
job whose dealer (dave) has its lines and the bytes it sent, two jobs compared, the jobs list's
duration and result, compressed and cached assets, and consent: with carol's policy set to ask
her, a job of alice's waits for carol, who approves one from her waiting list and rejects another
on its page; and no console error throughout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tessera_ml.worlds import free_port

ROOT = Path(__file__).resolve().parents[2]
FRONTEND = ROOT / "frontend"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
TOKEN = "browser-test-admin-token-0123456789"
# fixed demo party tokens (``tessera up`` takes TESSERA_TOKEN_<PARTY>): the script acts as them
PARTY_TOKENS = {
    "alice": "tsp_browser-test-alice-0123456789",
    "carol": "tsp_browser-test-carol-0123456789",
}

pytestmark = pytest.mark.browser


def _require(ok: bool, why: str) -> None:
    if ok:
        return
    if os.environ.get("TESSERA_REQUIRE_SERVICES") == "1":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _require(Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM}")
    _require(shutil.which("node") is not None, "no node on PATH")
    _require((FRONTEND / "dist" / "index.html").exists(), "dashboard not built (make frontend)")
    _require((FRONTEND / "node_modules").exists(), "frontend dependencies not installed")
    home = tmp_path_factory.mktemp("tessera-home")
    port = free_port()
    env = {
        **os.environ,
        "TESSERA_HOME": str(home),
        "TESSERA_ADMIN_TOKEN": TOKEN,
        "TESSERA_DATABASE_URL": "",
        "TESSERA_BROKER_URL": "",
        **{f"TESSERA_TOKEN_{name.upper()}": token for name, token in PARTY_TOKENS.items()},
    }
    env = {k: v for k, v in env.items() if v != ""}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tessera_api.cli",
            "up",
            "--port",
            str(port),
            "--parties",
            "alice,bob,carol,dave",
            "--workers",
            "alice,bob,dave",
        ],
        cwd=home,
        env=env,
        stdout=(home / "up.log").open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_workers(base, count=3, proc=proc, log=home / "up.log")
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _wait_for_workers(base: str, *, count: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    headers = {"Authorization": f"Bearer {TOKEN}"}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"tessera up exited with {proc.returncode}:\n{log.read_text()}")
        try:
            workers = httpx.get(f"{base}/api/v1/workers", headers=headers, timeout=5).json()
            if sum(w["online"] for w in workers.get("data", [])) >= count:
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(1)
    pytest.fail(f"workers did not come online:\n{log.read_text()}")


def test_dashboard_end_to_end(system: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "BASE_URL": system,
        "ADMIN_TOKEN": TOKEN,
        "CHROMIUM": CHROMIUM,
        "ALGORITHM": "ddp",
        "SECOND_PARTY": "bob",
        "THIRD_WORKER": "dave",
        "CREATOR_TOKEN": PARTY_TOKENS["alice"],
        "APPROVER_TOKEN": PARTY_TOKENS["carol"],
        "JOB_CONFIG": json.dumps({"steps": 30, "log_interval": 5}),
        "LONG_JOB_CONFIG": json.dumps({"steps": 1_000_000}),
        "SCREENSHOT": str(tmp_path / "job-detail.png"),
    }
    result = subprocess.run(
        ["node", "e2e/dashboard.mjs"],
        cwd=FRONTEND,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
    )
    print(result.stdout, result.stderr)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "16 passed, 0 failed" in result.stdout
    assert (tmp_path / "job-detail.png").stat().st_size > 10_000
