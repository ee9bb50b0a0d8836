"""The Celery application of a worker: one queue per party, thin tasks that carry ids only."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import worker_shutting_down

from tessera_worker.runtime import ControlPlaneUnavailable, Runtime

RUN_TASK = "tessera.run_task"

app = Celery("tessera")
_runtime: Runtime | None = None


def queues_of(party: str, worker_id: str) -> list[str]:
    """The party's queue, and this worker's own queue inside it (where placed tasks go)."""
    return [f"party.{party}", f"party.{party}.{worker_id}"]


def serve(runtime: Runtime) -> None:
    """Give the task below the runtime of the party this process serves."""
    global _runtime
    _runtime = runtime


@app.task(
    name=RUN_TASK,
    bind=True,
    acks_late=True,
    ignore_result=True,
    # a control plane that is down when the message arrives: deliver it again, until it is back
    autoretry_for=(ControlPlaneUnavailable,),
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=None,
)
def run_task(self: Any, job_id: str, attempt: int, task_id: str) -> str:
    """Run the ranks of one task of one attempt (everything else is looked up by id)."""
    if _runtime is None:
        raise RuntimeError("this process serves no party")
    return _runtime.execute(task_id)


@worker_shutting_down.connect
def _stop_running_tasks(**_: Any) -> None:
    if _runtime is not None:
        _runtime.agent.stop_everything()
