"""``tessera worker``: run one party's worker on this machine."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx

from tessera_worker import confine, hardware, procs, task_locks
from tessera_worker.agent import Agent
from tessera_worker.broker import EMBEDDED, broker_problem, celery_settings, redact
from tessera_worker.client import ApiError, ControlPlane
from tessera_worker.home import default_home
from tessera_worker.identity import WorkerIdentity
from tessera_worker.launcher import LaunchSettings, socket_interfaces
from tessera_worker.runtime import Runtime

SLUG = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
CODE_PREFIX = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?$")


class UsageError(Exception):
    """Bad input on the command line; the message is shown as is."""


def parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(
        prog="tessera worker",
        description="Run one party's worker: consume the party's queue and launch its ranks.",
    )
    p.add_argument("--party", default=env("TESSERA_PARTY"), help="party slug (TESSERA_PARTY)")
    p.add_argument(
        "--api",
        default=env("TESSERA_API_URL", "http://127.0.0.1:8000"),
        help="control plane URL (TESSERA_API_URL)",
    )
    p.add_argument(
        "--plain-http",
        action="store_true",
        help="allow an http:// --api on another host, where the network between the two is "
        "private (one machine's container network): the party token crosses it in clear",
    )
    p.add_argument(
        "--token", default=env("TESSERA_PARTY_TOKEN"), help="party token (TESSERA_PARTY_TOKEN)"
    )
    p.add_argument(
        "--token-file",
        default=env("TESSERA_PARTY_TOKEN_FILE"),
        help="read the party token from this file ('-': standard input), so it is in no "
        "environment or argument list",
    )
    p.add_argument(
        "--share-checkpoints",
        action="store_true",
        help="upload the checkpoint files of this party's ranks to the control plane, so the "
        "party can download them from the dashboard (default: they stay on this host)",
    )
    p.add_argument(
        "--allow-custom",
        action="append",
        default=[],
        metavar="PREFIX",
        help="code a job may make this worker import (a package, module or module:callable; "
        "repeatable; default: none)",
    )
    p.add_argument(
        "--rank-env",
        action="append",
        default=[],
        metavar="NAME",
        help="an environment variable the ranks also get (repeatable; by default they get "
        "only what Python, torch and its libraries read; secret-like names never)",
    )
    p.add_argument(
        "--confine-ranks",
        choices=("auto", "required", "off"),
        default=env("TESSERA_CONFINE_RANKS", "auto"),
        help="show each rank none of this worker's files but its own task's, through a user "
        "and mount namespace (TESSERA_CONFINE_RANKS; auto: where the host allows it, saying "
        "so where it does not; required: refuse to start without it)",
    )
    p.add_argument(
        "--hide-from-ranks",
        action="append",
        default=[],
        metavar="PATH",
        help="a file or folder confined ranks may not see, besides this worker's folder and "
        "its token file (repeatable): the folder a rotated token file lives in, a database "
        "or authority kept outside the worker's folder",
    )
    p.add_argument(
        "--ca-file",
        default=env("TESSERA_CA_FILE"),
        help="check an HTTPS control plane's certificate against this CA file (TESSERA_CA_FILE)",
    )
    p.add_argument(
        "--broker",
        default=env("TESSERA_BROKER_URL", EMBEDDED),
        help="broker URL, e.g. redis://host:6379/0 (TESSERA_BROKER_URL; default: embedded); "
        "the worker registers once its Redis answers",
    )
    p.add_argument("--home", default=env("TESSERA_HOME"), help="data directory (TESSERA_HOME)")
    p.add_argument(
        "--address",
        default=env("TESSERA_WORKER_ADDRESS"),
        help="address other parties' ranks reach this machine at (default: the route to the API)",
    )
    p.add_argument("--hostname", default=socket.gethostname(), help="name of this worker")
    p.add_argument("--concurrency", type=int, default=2, help="tasks run at the same time")
    p.add_argument("--heartbeat", type=float, default=2.0, help="seconds between heartbeats")
    p.add_argument("--rendezvous-timeout", type=float, default=120.0, help="seconds")
    p.add_argument("--collective-timeout", type=float, default=300.0, help="seconds")
    return p


def route_address(api_url: str) -> str:
    """The local address of the interface that reaches the control plane."""
    host = urlparse(api_url).hostname or "127.0.0.1"
    if host in {"localhost", "127.0.0.1", "::1"}:
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, 9))
            return str(s.getsockname()[0])
    except OSError:
        return socket.gethostbyname(socket.gethostname())


def _loopback(host: str) -> bool:
    """Whether ``host`` is this machine's loopback (a name: whether it resolves to it)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def read_token(args: argparse.Namespace) -> None:
    """Take the token from ``--token-file`` when given, and forget where it came from."""
    if args.token_file:
        try:
            text = sys.stdin.read() if args.token_file == "-" else Path(args.token_file).read_text()
        except OSError as exc:
            raise UsageError(f"cannot read --token-file {args.token_file}: {exc.strerror}") from exc
        args.token = text.strip()
    os.environ.pop("TESSERA_PARTY_TOKEN", None)


def check(args: argparse.Namespace) -> None:
    if not args.party:
        raise UsageError("--party is required (or set TESSERA_PARTY)")
    if not SLUG.match(args.party):
        raise UsageError(f"{args.party!r} is not a party slug (lowercase letters, digits, '-')")
    if not args.token:
        raise UsageError("a party token is required: --token-file, --token or TESSERA_PARTY_TOKEN")
    for prefix in args.allow_custom:
        if not CODE_PREFIX.match(prefix):
            raise UsageError(
                f"--allow-custom {prefix!r} is not a package, module or module:callable"
            )
    if args.confine_ranks not in {"auto", "required", "off"}:
        raise UsageError(
            f"--confine-ranks (TESSERA_CONFINE_RANKS) is auto, required or off, "
            f"not {args.confine_ranks!r}"
        )
    if args.ca_file and not Path(args.ca_file).is_file():
        raise UsageError(f"--ca-file {args.ca_file} is not a file")
    try:
        api = urlparse(args.api)
        api.port  # noqa: B018 (parses the port: raises on a bad one)
    except ValueError as exc:
        raise UsageError(f"--api {args.api!r} is not a URL: {exc}") from exc
    if api.scheme not in {"http", "https"} or not api.hostname:
        raise UsageError(f"--api must be an http(s) URL with a host, got {args.api!r}")
    if api.username is not None or api.password is not None:
        raise UsageError("--api must not hold a user or password: its ranks are told the address")
    if api.scheme == "http" and not _loopback(api.hostname) and not args.plain_http:
        raise UsageError(
            f"--api {args.api} is plain http to another host, which would send the party token "
            "in clear: use https (docs/security.md), or --plain-http where the network between "
            "the two is private"
        )
    if args.concurrency < 1 or args.heartbeat <= 0:
        raise UsageError("--concurrency must be at least 1 and --heartbeat positive")
    if args.rendezvous_timeout <= 0 or args.collective_timeout <= 0:
        raise UsageError("--rendezvous-timeout and --collective-timeout must be positive")


def ranks_confined(mode: str) -> bool:
    """Whether ranks run confined (``tessera_worker.confine``), as ``--confine-ranks`` asks
    and the host allows."""
    if mode == "off":
        return False
    found = confine.probe()
    problem = found.problem
    if problem is None and not found.own_proc:
        _say(
            "this host would not mount a /proc of their own for confined ranks: they can list "
            "its processes and read their command lines; give tokens with --token-file "
            "(docs/security.md, 'Each worker host')"
        )
    if problem is None and os.geteuid() == 0:
        as_root = (
            "this worker runs as root: its confined ranks still own root's files outside "
            "what is hidden (they can read them); run it as a user of its own"
        )
        if mode == "required":
            raise UsageError(f"--confine-ranks required, but {as_root}")
        _say(f"{as_root} (docs/security.md, 'Each worker host')")
    if problem is None:
        return True
    if mode == "required":
        raise UsageError(f"--confine-ranks required, but this host cannot confine ranks: {problem}")
    _say(
        f"ranks run unconfined, able to read this worker's files, because this host cannot "
        f"confine them: {problem} (docs/security.md, 'Each worker host')"
    )
    return False


def register(agent: Agent, api_url: str, party: str, wait_s: float = 60.0) -> str:
    """Register as a worker of ``party``, waiting for a control plane that is still starting."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            holder = agent.api.me()["name"]
            if holder != party:
                raise UsageError(
                    f"the token is {holder!r}'s, not party {party!r}'s: a worker registers "
                    "with a token of the party named by --party"
                )
            return agent.register()
        except ApiError as exc:
            if exc.status in {401, 403}:
                raise UsageError(f"the control plane rejected the token: {exc.detail}") from exc
            if not exc.retryable or time.monotonic() > deadline:
                raise UsageError(f"could not register at {api_url}: {exc}") from exc
        except httpx.HTTPError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                raise UsageError(
                    f"the control plane at {api_url} presented a certificate this worker does "
                    f"not trust (give its CA with --ca-file): {exc}"
                ) from exc
            if time.monotonic() > deadline:
                raise UsageError(f"cannot reach the control plane at {api_url}: {exc}") from exc
        time.sleep(1.0)


def _say(message: str) -> None:
    print(f"tessera worker: {message}", file=sys.stderr, flush=True)


def socket_interface_env(address: str) -> dict[str, str]:
    """Make gloo and NCCL listen on the interface other parties reach this machine at (for a
    party whose ranks are not all in one task: the launcher uses loopback for the others)."""
    interface = hardware.interface_of(address)
    return {} if interface is None else socket_interfaces(interface)


def _restart(worker_id: str) -> None:
    """The control plane forgot this worker: the queues consumed are stale, so start over."""
    print(
        f"tessera worker: registered again as {worker_id}; restarting to consume its queue",
        file=sys.stderr,
        flush=True,
    )
    os.kill(os.getpid(), signal.SIGTERM)


def _cut_off(detail: str) -> None:
    """The control plane disabled this worker's party: its tasks were stopped; leave."""
    print(f"tessera worker: {detail}; stopping", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)


def build_runtime(args: argparse.Namespace, *, confine_ranks: bool) -> Runtime:
    home = Path(args.home).expanduser() if args.home else default_home()
    address = args.address or route_address(args.api)
    api = ControlPlane(args.api, args.token, verify=args.ca_file or True)
    identity = WorkerIdentity(home / "identity" / args.party, args.hostname)
    agent = Agent(
        api,
        describe=lambda: hardware.describe(args.hostname, address),
        accelerators=hardware.accelerators,
        heartbeat_s=args.heartbeat,
        on_new_identity=_restart,
        identity=identity,
        on_cut_off=_cut_off,
    )
    settings = LaunchSettings(
        extra_env=socket_interface_env(address),
        home=home,
        api_url=args.api,
        api_ca_file=args.ca_file,
        rendezvous_timeout_s=args.rendezvous_timeout,
        collective_timeout_s=args.collective_timeout,
        address=address,
        allow_custom=tuple(args.allow_custom),
        rank_env=tuple(args.rank_env),
        share_checkpoints=args.share_checkpoints,
        confine=confine_ranks,
        # named as given: a link (a rotated secret's) is followed again for each rank
        hidden=tuple(
            os.path.abspath(path)
            for path in [
                *([args.token_file] if args.token_file and args.token_file != "-" else []),
                *args.hide_from_ranks,
            ]
        ),
    )
    return Runtime(
        party=args.party,
        api=api,
        agent=agent,
        launch=settings,
        address=address,
        identity=identity,
    )


def celery_worker(app: Any, name: str, queues: list[str], concurrency: int) -> Any:
    """A Celery worker that consumes ``queues`` and nothing else: no events, no exchanges with
    other workers (mingle, gossip, heartbeat) and, through ``celery_settings``, no remote
    control, so another party holding the broker's password cannot stop or steer it."""
    return app.Worker(
        hostname=name,
        queues=queues,
        pool="threads",
        concurrency=concurrency,
        loglevel="INFO",
        without_mingle=True,
        without_gossip=True,
        without_heartbeat=True,
        quiet=True,
    )


def serve(runtime: Runtime, args: argparse.Namespace) -> int:
    from tessera_worker.celery_app import app, queues_of, serve

    app.conf.update(celery_settings(args.broker, runtime.launch.home))
    serve(runtime)
    runtime.agent.start()
    try:
        queues = queues_of(args.party, str(runtime.agent.worker_id))
        worker = celery_worker(app, f"{args.party}@{args.hostname}", queues, args.concurrency)
        worker.start()
        return int(worker.exitcode or 0)
    finally:
        runtime.agent.close()


def main(argv: list[str] | None = None) -> int:
    procs.die_with_parent()
    args = parser().parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        read_token(args)
        check(args)
        problem = broker_problem(args.broker, say=_say)
        if problem is not None:
            raise UsageError(problem)
        procs.keep_memory_private()  # ranks run as this user: they must not read its token
        runtime = build_runtime(args, confine_ranks=ranks_confined(args.confine_ranks))
        swept, problems = task_locks.sweep(runtime.launch)
        if swept:
            _say(f"removed what {len(swept)} task(s) that no worker runs left: {', '.join(swept)}")
        for problem in problems:
            _say(f"could not tidy after a stopped task: {problem}")
        worker_id = register(runtime.agent, args.api, args.party)
    except UsageError as exc:
        print(f"tessera worker: {exc}", file=sys.stderr)
        return 2
    print(
        f"tessera worker: party {args.party} registered as worker {worker_id}; "
        f"consuming party.{args.party}.{worker_id} at {redact(args.broker)}",
        flush=True,
    )
    return serve(runtime, args)
