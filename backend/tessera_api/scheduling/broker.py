"""Sending ``tessera.run_task`` to a party's queue, by task name (the worker code is not imported).

``filesystem://`` (no path) is the zero-setup broker: message files under ``$TESSERA_HOME/broker``,
the convention ``tessera_worker.broker`` shares.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from celery import Celery

RUN_TASK = "tessera.run_task"
EMBEDDED = "filesystem://"


def queue_of(party: str, worker_id: str) -> str:
    """The queue of one worker of a party (each worker also consumes ``party.<slug>``)."""
    return f"party.{party}.{worker_id}"


class TaskSender(Protocol):
    def send(self, *, party: str, worker_id: str, job_id: str, attempt: int, task_id: str) -> None:
        """Put one task on the queue of the party's worker that hosts it."""


def celery_sender_app(broker_url: str, home: Path) -> Celery:
    app = Celery("tessera-control-plane")
    conf: dict[str, Any] = {
        "broker_url": broker_url,
        "broker_connection_retry_on_startup": True,
        "task_serializer": "json",
        "accept_content": ["json"],
    }
    if broker_url == EMBEDDED:
        folder = home / "broker" / "queue"
        folder.mkdir(parents=True, exist_ok=True)
        conf["broker_transport_options"] = {
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "control_folder": str(home / "broker" / "control"),
            "store_processed": False,
        }
    app.conf.update(conf)
    return app


class CelerySender:
    """Publishes through Celery to Redis or the embedded broker."""

    def __init__(self, broker_url: str, home: Path) -> None:
        self.app = celery_sender_app(broker_url, home)

    def send(self, *, party: str, worker_id: str, job_id: str, attempt: int, task_id: str) -> None:
        queue = queue_of(party, worker_id)
        self.app.send_task(
            RUN_TASK, args=[job_id, attempt, task_id], queue=queue, routing_key=queue
        )
