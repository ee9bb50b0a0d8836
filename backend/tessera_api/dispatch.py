"""The seam between the control plane and whatever runs jobs.

Routes call the dispatcher after they commit: ``submit`` when a job is created or retried (the
job is ``pending`` with a fresh attempt), ``cancel`` after a cancel request was recorded. The
dispatcher works in the session it is given and may commit it; the route commits afterwards.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy.orm import Session

from tessera_api.models import Job
from tessera_api.services.approvals import approved
from tessera_api.services.lifecycle import queue_job
from tessera_api.states import JobStatus


class Dispatcher(Protocol):
    def submit(self, session: Session, *, job_id: str) -> None:
        """A pending job (new, retried, or newly approved) may be ready to be queued and placed;
        one that some party has not approved stays pending."""

    def cancel(self, session: Session, *, job_id: str) -> None:
        """A job was cancelled or is cancelling; stop whatever is on its way."""


class QueueDispatcher:
    """Queues jobs and leaves them there: the default until a scheduler is plugged in."""

    def submit(self, session: Session, *, job_id: str) -> None:
        job = session.get(Job, job_id)
        if job is not None and JobStatus(job.status) is JobStatus.pending and approved(job):
            queue_job(session, job_id=job_id)

    def cancel(self, session: Session, *, job_id: str) -> None:
        return None
