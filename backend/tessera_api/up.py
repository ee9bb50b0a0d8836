"""``tessera up``: the control plane, its scheduler, the dashboard and local workers, in one go.

Zero setup by default: SQLite and the embedded filesystem broker under ``$TESSERA_HOME``. With
``TESSERA_DATABASE_URL`` and ``TESSERA_BROKER_URL`` set it uses those (PostgreSQL, Redis).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from sqlalchemy.engine import make_url

from tessera_api import startup
from tessera_api.demo import DEMO_PARTIES, ensure_party, token_file
from tessera_api.serve import SHUTDOWN_GRACE_S, add_tls_arguments, tls_problem
from tessera_api.settings import DEFAULT_ADMIN_TOKEN, Mode, Settings
from tessera_worker import procs
from tessera_worker.broker import EMBEDDED, redact
from tessera_worker.cli import SLUG, UsageError
from tessera_worker.launcher import SECRET_NAME

USAGE_EXIT = 2
"""What ``tessera worker`` exits with when it cannot or may not run."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tessera up",
        description="Start the control plane, the dashboard and a local worker per demo party.",
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to serve on")
    p.add_argument("--port", type=int, default=8000, help="port to serve on (default 8000)")
    p.add_argument(
        "--parties",
        default=",".join(DEMO_PARTIES),
        help="demo parties to create (comma-separated; default: %(default)s)",
    )
    add_tls_arguments(p)
    p.add_argument(
        "--tls-ca",
        help="the CA the local workers check --tls-cert against (default: --tls-cert itself, "
        "which suits a self-signed certificate)",
    )
    p.add_argument(
        "--workers",
        default=None,
        help="parties that get a local worker (comma-separated; default: every demo party; "
        "'none' for the control plane alone)",
    )
    return p


def _names(text: str, what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if not SLUG.match(n)]
    if bad:
        raise UsageError(f"{what}: {', '.join(map(repr, bad))} are not party slugs")
    return names


def check(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, got {args.port}")
    problem = tls_problem(args.tls_cert, args.tls_key)
    if problem is not None:
        raise UsageError(problem)
    if args.tls_ca is not None and not Path(args.tls_ca).is_file():
        raise UsageError(f"--tls-ca {args.tls_ca} is not a file")
    parties = _names(args.parties, "--parties")
    if args.workers is None:
        return parties, parties
    workers = [] if args.workers == "none" else _names(args.workers, "--workers")
    unknown = sorted(set(workers) - set(parties))
    if unknown:
        raise UsageError(f"--workers names parties that --parties does not: {', '.join(unknown)}")
    return parties, workers


def load_settings() -> Settings:
    # zero setup: without TESSERA_BROKER_URL, the embedded broker rather than a local Redis
    if "TESSERA_BROKER_URL" not in os.environ:
        return startup.load_settings(broker_url=EMBEDDED)
    return startup.load_settings()


def control_plane_files(settings: Settings) -> list[Path]:
    """The authority, the uploaded files and a SQLite database of this control plane."""
    files = [settings.resolved_ca_dir, settings.resolved_artifacts_dir]
    url = make_url(settings.resolved_database_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        files += [Path(url.database + end) for end in ("", "-wal", "-shm", "-journal")]
    return files


def start_worker(
    party: str, token: str, api_url: str, settings: Settings, ca_file: str | None = None
) -> subprocess.Popen[bytes]:
    """``tessera worker`` for one party, as a child that dies with this process.

    The worker gets its party's token on its standard input, and none of the control plane's
    secrets (admin token, database): only what a party's own host would have."""
    home = settings.home
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("TESSERA_") and not SECRET_NAME.search(name)
    }
    env.update(TESSERA_HOME=str(home), TESSERA_BROKER_URL=settings.broker_url)
    if "TESSERA_CONFINE_RANKS" in os.environ:
        env["TESSERA_CONFINE_RANKS"] = os.environ["TESSERA_CONFINE_RANKS"]
    argv = [sys.executable, "-m", "tessera_api.cli", "worker", "--party", party, "--api", api_url]
    if api_url.startswith("http://"):  # to this machine, at whatever address it serves on
        argv.append("--plain-http")
    # one machine, one owner: the demo's parties share checkpoint files with the dashboard
    argv.append("--share-checkpoints")
    # the control plane's own files, wherever they are kept, are no rank's to read
    for path in control_plane_files(settings):
        argv += ["--hide-from-ranks", str(path)]
    if ca_file is not None:
        argv += ["--ca-file", ca_file]
    return procs.spawn(
        [*argv, "--token-file", "-"],
        env=env,
        log_path=home / "logs" / f"worker-{party}.log",
        stdin_text=token,
    )


def banner(url: str, settings: Settings, parties: list[str], workers: list[str]) -> str:
    admin = (
        f"admin token: {DEFAULT_ADMIN_TOKEN} (development default; set TESSERA_ADMIN_TOKEN)"
        if settings.admin_token == DEFAULT_ADMIN_TOKEN
        else "admin token: from TESSERA_ADMIN_TOKEN"
    )
    lines = [
        f"Tessera is up on {url}  (dashboard at /, API docs at /api/v1/docs)",
        admin,
        f"data: {settings.home}   database: {settings.resolved_database_url.split('@')[-1]}",
        f"broker: {redact(settings.broker_url)}",
        f"demo parties: {', '.join(parties)} (tokens in {token_file(settings.home, '*')})",
        f"local workers: {', '.join(workers) or 'none'} (logs in {settings.home / 'logs'})",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        parties, local = check(args)
        settings = load_settings()
        check_port_free(args.host, args.port)
        prepare_database(settings)
    except (UsageError, startup.StartupError) as exc:
        print(f"tessera up: {exc}", file=sys.stderr)
        return 2
    # the admin token and the database address live here: closed to the local workers' ranks,
    # which run as this user
    procs.keep_memory_private()
    return run(settings, args, parties, local)


def check_port_free(host: str, port: int) -> None:
    """Refuse a port another process listens on; one a stopped server left in TIME-WAIT is free
    (the server binds with SO_REUSEADDR too), so a restart serves again at once."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise UsageError(
                f"cannot serve on {host}:{port} ({exc.strerror}); choose another with --port"
            ) from exc


def prepare_database(settings: Settings) -> None:
    """Create the data directory and migrate the database to the latest schema."""
    startup.prepare_home(settings)
    startup.migrate_database(settings)


WORKER_STOP_GRACE_S = 20.0
"""How long ``tessera up`` waits for its local workers to stop before it kills them."""


def run(settings: Settings, args: argparse.Namespace, parties: list[str], local: list[str]) -> int:
    import uvicorn

    from tessera_api.scheduling.service import create_scheduled_app

    app = create_scheduled_app(settings)
    # on one machine the demo parties consent to each other's and the admin's jobs unasked
    trusted = [*parties, "admin"] if settings.mode is Mode.development else []
    with app.state.session_factory() as session:
        tokens = {name: ensure_party(session, settings.home, name, trusted) for name in parties}
        session.commit()
    host = "127.0.0.1" if args.host in {"0.0.0.0", "::"} else args.host
    url = f"{'https' if args.tls_cert else 'http'}://{host}:{args.port}"
    ca_file = args.tls_ca or args.tls_cert
    workers_stopping = threading.Event()

    class Server(uvicorn.Server):
        """Stops the local workers before itself, so that what they report as they stop (their
        tasks' ends, the last metrics their ranks left) still reaches it; a second signal kills
        them and stops at once."""

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if workers_stopping.is_set() or not server.started:
                for worker in workers:
                    procs.signal_group(worker, signal.SIGKILL)
                super().handle_exit(sig, frame)
                return
            print("tessera up: stopping the local workers, then the server", flush=True)
            workers_stopping.set()

    server = Server(
        uvicorn.Config(
            app,
            host=args.host,
            port=args.port,
            log_level="warning",
            ssl_certfile=args.tls_cert,
            ssl_keyfile=args.tls_key,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        )
    )
    workers: list[subprocess.Popen[bytes]] = []

    def supervise_workers() -> None:
        # runs until shutdown: children die with the thread that spawned them
        while not server.started and not server.should_exit:
            time.sleep(0.1)
        if server.should_exit:
            return
        running = {name: start_worker(name, tokens[name], url, settings, ca_file) for name in local}
        workers.extend(running.values())
        print(banner(url, settings, parties, local), flush=True)
        while not server.should_exit and not workers_stopping.is_set():
            for name, proc in list(running.items()):
                if proc.poll() is None:
                    continue
                if proc.returncode == USAGE_EXIT:  # refused (a disabled party): not again
                    print(f"tessera up: worker {name} stopped; see its log", flush=True)
                    del running[name]
                    continue
                print(f"tessera up: worker {name} exited ({proc.returncode}); restarting")
                running[name] = start_worker(name, tokens[name], url, settings, ca_file)
                workers.append(running[name])
            workers_stopping.wait(1.0)
        # a worker stops its ranks (SIGTERM, then SIGKILL after its stop grace), waits for
        # their processes and reports: seconds, more than that only when something hangs
        procs.stop_all(list(running.values()), grace_s=WORKER_STOP_GRACE_S)
        server.should_exit = True

    supervisor = threading.Thread(target=supervise_workers, name="workers", daemon=True)
    supervisor.start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        # uvicorn re-raises the signal it shut down on: make that a no-op, not a traceback
        signal.signal(sig, lambda *_: setattr(server, "should_exit", True))
    try:
        server.run()
    finally:
        server.should_exit = True
        supervisor.join(timeout=WORKER_STOP_GRACE_S + 5)
        procs.kill_all(workers)
    return 0 if server.started else 1
