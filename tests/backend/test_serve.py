"""`tessera api` migrates the database and serves the control plane."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, inspect

from tessera_api.serve import main


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_tessera_api_migrates_then_serves(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "TESSERA_HOME": str(tmp_path), "TESSERA_ADMIN_TOKEN": "serve-token"}
    env.pop("TESSERA_DATABASE_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "tessera_api.cli", "api", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(
                    f"http://127.0.0.1:{port}/api/v1/version",
                    headers={"Authorization": "Bearer serve-token"},
                )
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert response.status_code == 200
        assert response.json()["api"] == "v1"
        engine = create_engine(f"sqlite:///{tmp_path / 'tessera.db'}")
        assert {"jobs", "parties", "alembic_version"} <= set(inspect(engine).get_table_names())
        engine.dispose()
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_invalid_settings_refuse_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_MODE", "production")
    monkeypatch.setenv("TESSERA_ADMIN_TOKEN", "")
    assert main(["--port", "1"]) == 2
