"""Celery settings shared by every worker, for Redis or the embedded filesystem broker.

``filesystem://`` (no path) names the zero-setup broker: message files under
``$TESSERA_HOME/broker``, which the control plane on the same machine writes to. The control
plane's ``tessera_api.scheduling.broker`` reads the same convention.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

EMBEDDED = "filesystem://"
BROKER_SAY_EVERY_S = 30.0


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + netloc))


def celery_settings(broker_url: str, home: Path) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "broker_url": broker_url,
        "broker_connection_retry_on_startup": True,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_ignore_result": True,
        "worker_prefetch_multiplier": 1,
        "worker_hijack_root_logger": False,
        "task_serializer": "json",
        "accept_content": ["json"],
        # no remote control (Tessera never uses it): every party holds the broker's password,
        # and would otherwise be able to shut down, revoke the tasks of, or question the
        # workers of every other party
        "worker_enable_remote_control": False,
    }
    if broker_url.startswith(("redis://", "rediss://")):
        # a task runs as long as its training: never hand its message to another worker meanwhile
        settings["broker_transport_options"] = {"visibility_timeout": 30 * 24 * 3600}
    if broker_url == EMBEDDED:
        folder = home / "broker"
        (folder / "queue").mkdir(parents=True, exist_ok=True)
        settings["broker_transport_options"] = {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            # fanout (remote-control) exchanges: under the home, not the working directory
            "control_folder": str(folder / "control"),
            "store_processed": False,
        }
        # (without remote control, too, as its broadcast exchange is one file that every
        # starting worker rewrites, unlocked: workers started at once left it corrupt, after
        # which no worker could start on this broker again)
    return settings


def broker_problem(
    broker_url: str, wait_s: float | None = None, say: Callable[[str], None] | None = None
) -> str | None:
    """Why a worker cannot consume from ``broker_url``, or None. Checked before the worker
    registers: a worker that cannot reach its broker would look online and never get a task.
    A URL that is no URL, or a password Redis refuses, is a problem at once. A Redis that does
    not answer is waited for (``wait_s``; None: as long as it takes, through an outage), saying
    so through ``say`` now and then. Other brokers Celery knows are not checked."""
    if broker_url == EMBEDDED:
        return None
    shown = redact(broker_url)
    scheme = urlsplit(broker_url).scheme
    if "://" not in broker_url or not scheme:
        return f"--broker must be a URL such as redis://host:6379/0 or {EMBEDDED}, got {shown!r}"
    if scheme not in ("redis", "rediss"):
        return None
    import redis

    deadline = None if wait_s is None else time.monotonic() + wait_s
    said_at = float("-inf")
    while True:
        try:
            client = redis.Redis.from_url(broker_url, socket_connect_timeout=3, socket_timeout=3)
            try:
                client.ping()
            finally:
                client.close()
            return None
        except (redis.AuthenticationError, ValueError) as exc:
            return f"cannot use the broker at {shown}: {exc}"
        except (redis.RedisError, OSError) as exc:
            if deadline is not None and time.monotonic() > deadline:
                return f"cannot use the broker at {shown}: {exc}"
            if say is not None and time.monotonic() - said_at >= BROKER_SAY_EVERY_S:
                say(f"waiting for the broker at {shown}: {exc}")
                said_at = time.monotonic()
        time.sleep(1.0)
