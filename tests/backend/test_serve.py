"""`tessera api` migrates the database and serves the control plane."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, inspect

from tessera_api.serve import main
from tessera_ml.ports import free_port


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


def test_invalid_settings_refuse_to_start_without_showing_a_value(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TESSERA_MODE", "production")
    monkeypatch.setenv("TESSERA_ADMIN_TOKEN", "hunter2")  # too short for production
    assert main(["--port", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tessera api: invalid settings") and "TESSERA_ADMIN_TOKEN" in err
    assert "hunter2" not in err


@pytest.mark.parametrize(
    ("environment", "argv", "message"),
    [
        ({}, ["--port", "70000"], "--port must be between 1 and 65535, got 70000"),
        ({"TESSERA_MODE": "bogus"}, [], "TESSERA_MODE: Input should be"),
        ({"TESSERA_HOME": "/proc/no/such"}, [], "cannot use TESSERA_HOME=/proc/no/such"),
        ({"TESSERA_DATABASE_URL": "nonsense"}, [], "cannot use the database at nonsense"),
        (
            {"TESSERA_DATABASE_URL": "postgresql+psycopg://u:pw@127.0.0.1:9/none"},
            [],
            "cannot use the database at 127.0.0.1:9/none (TESSERA_DATABASE_URL)",
        ),
        ({"TESSERA_DATABASE_URL": "mysql://a@b/c"}, [], "No module named"),
    ],
)
def test_what_the_server_cannot_start_with_is_one_line(
    environment: dict[str, str],
    argv: list[str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert main(["--no-scheduler", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tessera api: ") and message in err
    assert "Traceback" not in err and "pw" not in err


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A server certificate for 127.0.0.1, signed by itself (its own CA file)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "server.pem", folder / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_tessera_api_serves_https_that_workers_verify_against_a_ca_file(tmp_path: Path) -> None:
    from tessera_worker.client import ControlPlane

    cert, key = self_signed(tmp_path)
    port = free_port()
    env = {**os.environ, "TESSERA_HOME": str(tmp_path), "TESSERA_ADMIN_TOKEN": "serve-token"}
    env.pop("TESSERA_DATABASE_URL", None)
    argv = [sys.executable, "-m", "tessera_api.cli", "api", "--port", str(port)]
    process = subprocess.Popen(
        [*argv, "--tls-cert", str(cert), "--tls-key", str(key), "--no-scheduler"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"{url}/api/v1/health", verify=str(cert))
                break
            except httpx.ConnectError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert health.json() == {"status": "ok"}
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{url}/api/v1/health")  # the system's CAs do not know it
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/api/v1/health")  # no plaintext
        api = ControlPlane(url, "serve-token", verify=str(cert))
        with pytest.raises(Exception, match="403"):
            api.register({"hostname": "h", "cpu_count": 1, "memory_bytes": 1})  # admin: 403
        api.close()
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tls-cert", "x.pem"], "--tls-cert and --tls-key go together"),
        (
            ["--tls-cert", "/nope.pem", "--tls-key", "/nope.key"],
            "--tls-cert /nope.pem is not a file",
        ),
    ],
)
def test_tls_arguments_are_checked_before_serving(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--port", "1", *extra]) == 2
    assert message in capsys.readouterr().err


def test_a_stopping_server_ends_open_event_streams_at_once(tmp_path: Path) -> None:
    """SIGTERM with a dashboard following a live job: the stream ends cleanly and the server
    exits well inside its 5 s grace period, instead of waiting it out."""
    port = free_port()
    env = {**os.environ, "TESSERA_HOME": str(tmp_path), "TESSERA_ADMIN_TOKEN": "serve-token"}
    env.pop("TESSERA_DATABASE_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "tessera_api.cli", "api", "--port", str(port), "--no-scheduler"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}/api/v1"
    auth = {"Authorization": "Bearer serve-token"}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/version", headers=auth)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert httpx.post(f"{base}/parties", json={"name": "alice"}, headers=auth).is_success
        job = {
            "name": "j",
            "algorithm": "ddp",
            "assignments": [{"party": "alice", "role": "trainer"}],
        }
        job_id = httpx.post(f"{base}/jobs", json=job, headers=auth).json()["id"]
        with httpx.stream(
            "GET", f"{base}/jobs/{job_id}/events", headers=auth, timeout=30
        ) as stream:
            chunks = stream.iter_text()
            assert next(chunks).startswith("retry:")
            stopped_at = time.monotonic()
            process.send_signal(signal.SIGTERM)
            # ends when the server ends the stream; raises if the server cut it instead
            "".join(chunks)
            ended_in = time.monotonic() - stopped_at
        # uvicorn stops, then lets the signal it caught end the process as it would have
        assert process.wait(timeout=20) in (0, -signal.SIGTERM)
        assert ended_in < 2.0 and time.monotonic() - stopped_at < 3.0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
