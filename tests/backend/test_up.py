"""``tessera up`` answers bad input with a message and exit code 2, without a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tessera_api import up
from tessera_api.settings import Settings


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--port", "70000"], "--port must be between 1 and 65535"),
        (["--parties", "alice,Bob"], "'Bob' are not party slugs"),
        (["--parties", "alice", "--workers", "bob"], "--workers names parties that --parties"),
    ],
)
def test_up_rejects_bad_arguments(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert up.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tessera up: ") and message in err


def test_up_refuses_a_weak_secret_in_production_without_a_traceback() -> None:
    env = {"TESSERA_MODE": "production", "TESSERA_ADMIN_TOKEN": "short", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "tessera_api.cli", "up"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.startswith("tessera up: invalid settings")
    assert "Traceback" not in done.stderr


def test_up_says_when_the_port_is_taken_or_the_database_unusable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert up.main(["--port", str(port)]) == 2
    assert f"cannot serve on 127.0.0.1:{port}" in capsys.readouterr().err

    monkeypatch.setenv("TESSERA_DATABASE_URL", "postgresql+psycopg://nobody@127.0.0.1:9/none")
    assert up.main(["--port", str(port)]) == 2
    assert "cannot use the database at 127.0.0.1:9/none" in capsys.readouterr().err


def test_a_port_left_in_time_wait_by_a_stopped_server_is_free_again() -> None:
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            accepted.close()  # the server closes first: its end of the connection waits
            client.recv(1)
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # what a bind without SO_REUSEADDR meets
    up.check_port_free("127.0.0.1", port)


def test_the_workers_of_up_hide_the_control_planes_files_wherever_they_are(tmp_path: Path) -> None:
    elsewhere = Settings(
        home=tmp_path / "home",
        database_url=f"sqlite:///{tmp_path / 'db' / 'plane.db'}",
        ca_dir=tmp_path / "authority",
    )
    assert up.control_plane_files(elsewhere) == [
        tmp_path / "authority",
        tmp_path / "home" / "artifacts",
        *(tmp_path / "db" / f"plane.db{end}" for end in ("", "-wal", "-shm", "-journal")),
    ]
    server = Settings(home=tmp_path / "home", database_url="postgresql+psycopg://u@h/db")
    assert up.control_plane_files(server) == [
        tmp_path / "home" / "ca",
        tmp_path / "home" / "artifacts",
    ]
