"""``tessera api``: migrate the database, then serve the control plane."""

from __future__ import annotations

import argparse
import gc
import os
import ssl
import sys
from pathlib import Path

from fastapi import FastAPI

from tessera_api import startup
from tessera_api.settings import DEFAULT_ADMIN_TOKEN, Settings
from tessera_worker.procs import keep_memory_private

SHUTDOWN_GRACE_S = 5
"""How long a stopping server waits for open connections (idle keep-alives, event streams,
TLS shutdowns that a client never answers) before it closes them: a restart must not wait."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tessera api", description="serve the control plane")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--no-migrate", action="store_true", help="skip `alembic upgrade head`")
    parser.add_argument(
        "--no-scheduler",
        action="store_true",
        help="only queue jobs; place and dispatch nothing (no broker needed)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes on this port (each takes part in scheduling through the lease)",
    )
    add_tls_arguments(parser)
    return parser.parse_args(argv)


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM, with chain)")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM)")


def tls_problem(cert: str | None, key: str | None) -> str | None:
    """Why ``--tls-cert``/``--tls-key`` cannot be used, or None when they can (or are unset)."""
    if (cert is None) != (key is None):
        return "--tls-cert and --tls-key go together"
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not Path(path).is_file():
            return f"{flag} {path} is not a file"
    if cert is not None and key is not None:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as exc:
            return f"cannot use {cert} with {key}: {exc}"
    return None


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    problem = tls_problem(args.tls_cert, args.tls_key)
    if args.workers < 1:
        problem = "--workers must be at least 1"
    if not 0 < args.port < 65536:
        problem = f"--port must be between 1 and 65535, got {args.port}"
    if problem is not None:
        print(f"tessera api: {problem}", file=sys.stderr)
        return 2
    try:
        settings = startup.load_settings()
        startup.prepare_home(settings)
        if settings.admin_token == DEFAULT_ADMIN_TOKEN:
            print(
                "tessera api: using the development admin token; set TESSERA_ADMIN_TOKEN",
                file=sys.stderr,
            )
        if not args.no_migrate:
            startup.migrate_database(settings)
    except startup.StartupError as exc:
        print(f"tessera api: {exc}", file=sys.stderr)
        return 2

    import uvicorn

    if args.no_scheduler:
        os.environ["TESSERA_RUN_SCHEDULER"] = "false"  # read again by each server process
    uvicorn.run(
        "tessera_api.serve:app_from_environment",
        factory=True,
        workers=args.workers,
        host=args.host,
        port=args.port,
        ssl_certfile=args.tls_cert,
        ssl_keyfile=args.tls_key,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )
    return 0


def app_from_environment() -> FastAPI:
    """The app each server process builds from the ``TESSERA_*`` environment."""
    # the admin token and the database address are in this process's environment and memory:
    # closed to other processes of the user (a worker's ranks, where one shares the host)
    keep_memory_private()
    settings = Settings()
    app = build_app(settings, not settings.run_scheduler)
    # What exists now (modules, the app, its schemas) lives as long as the process: kept out of
    # the collector's sight, a full collection walks only what requests made, not all of it.
    gc.freeze()
    return app


def build_app(settings: Settings, no_scheduler: bool) -> FastAPI:
    """The app with the scheduler behind its dispatcher, or with the queue-only dispatcher."""
    if no_scheduler:
        from tessera_api.app import create_app

        return create_app(settings)
    from tessera_api.scheduling.service import create_scheduled_app

    return create_scheduled_app(settings)
