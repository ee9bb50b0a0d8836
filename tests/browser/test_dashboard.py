"""The dashboard in headless Chromium against a real control plane and real local workers.

Starts ``tessera up`` (API, dashboard, workers for alice, bob and dave, embedded broker; carol is
a party without a worker) and runs ``frontend/e2e/dashboard.mjs``: sign in, a validation error for
a bad configuration, a job created through the form with tags that succeeds with points on its
loss chart, its page (overview, final metrics, roles, the configuration's changes, no Retry), a
checkpoint file downloaded from its artifacts byte for byte as recorded, its tag filtering the
jobs list, run again with
changes, a nested field's error at that field, every algorithm created through the form with its
Quick demo preset and its default roles (a party with a worker where the default has none) and
all of them run side by side to success, a cancelled job whose logs say so in one line per rank,
the Quick demo's split_nn job whose logs hold every rank's lines (filtered by party and level)
with the bytes between parties, its mpc_mixed job whose dealer (dave) has its lines and the bytes
it sent, two jobs compared, the jobs list's duration and result, compressed and cached assets,
and consent: with carol's policy set to ask her, a job of alice's waits for carol, who approves
one from her waiting list and rejects another on its page; and no console error throughout.

The README's screenshots come from this run: ``TESSERA_SCREENSHOTS=docs/images .venv/bin/pytest
tests/browser/test_dashboard.py`` writes new-job.png, job-detail.png, compare.png and parties.png
there.
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

pytestmark = [pytest.mark.browser, pytest.mark.serial]


def _require(ok: bool, why: str) -> None:
    if ok:
        return
    if os.environ.get("TESSERA_REQUIRE_SERVICES") == "1":
        pytest.fail(why)
    pytest.skip(why)


def require_browser() -> None:
    """Skip (fail, with TESSERA_REQUIRE_SERVICES=1) without Chromium, node or a built dashboard."""
    _require(Path(CHROMIUM).exists(), f"no Chromium at {CHROMIUM}")
    _require(shutil.which("node") is not None, "no node on PATH")
    _require((FRONTEND / "dist" / "index.html").exists(), "dashboard not built (make frontend)")
    _require((FRONTEND / "node_modules").exists(), "frontend dependencies not installed")


def start_tessera(home: Path, port: int, *, parties: str, workers: str) -> subprocess.Popen[bytes]:
    """``tessera up`` on SQLite and the embedded broker in ``home``, its output in up.log there."""
    env = {
        **os.environ,
        "TESSERA_HOME": str(home),
        "TESSERA_ADMIN_TOKEN": TOKEN,
        "TESSERA_DATABASE_URL": "",
        "TESSERA_BROKER_URL": "",
        **{f"TESSERA_TOKEN_{name.upper()}": token for name, token in PARTY_TOKENS.items()},
    }
    env = {k: v for k, v in env.items() if v != ""}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tessera_api.cli",
            "up",
            "--port",
            str(port),
            "--parties",
            parties,
            "--workers",
            workers,
        ],
        cwd=home,
        env=env,
        stdout=(home / "up.log").open("a"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_tessera(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to ``tessera up`` and its workers; SIGKILL if they are not gone in 30 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_browser()
    home = tmp_path_factory.mktemp("tessera-home")
    port = free_port()
    proc = start_tessera(home, port, parties="alice,bob,carol,dave", workers="alice,bob,dave")
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for_workers(base, count=3, proc=proc, log=home / "up.log")
        yield base
    finally:
        stop_tessera(proc)


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


SCREENSHOTS = ("new-job.png", "job-detail.png", "compare.png", "parties.png")


def test_dashboard_end_to_end(system: str, tmp_path: Path) -> None:
    # TESSERA_SCREENSHOTS=docs/images keeps the README's screenshots from this run
    shots = Path(os.environ.get("TESSERA_SCREENSHOTS") or tmp_path).resolve()
    shots.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "BASE_URL": system,
        "ADMIN_TOKEN": TOKEN,
        "CHROMIUM": CHROMIUM,
        "ALGORITHM": "ddp",
        "SECOND_PARTY": "bob",
        "CREATOR_TOKEN": PARTY_TOKENS["alice"],
        "APPROVER_TOKEN": PARTY_TOKENS["carol"],
        "JOB_CONFIG": json.dumps({"steps": 30, "log_interval": 5, "checkpoint_interval": 10}),
        "LONG_JOB_CONFIG": json.dumps({"steps": 1_000_000}),
        "NEW_JOB_SCREENSHOT": str(shots / "new-job.png"),
        "SCREENSHOT": str(shots / "job-detail.png"),
        "COMPARE_SCREENSHOT": str(shots / "compare.png"),
        "PARTIES_SCREENSHOT": str(shots / "parties.png"),
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
    assert "18 passed, 0 failed" in result.stdout
    for name in SCREENSHOTS:
        assert (shots / name).stat().st_size > 10_000, name
