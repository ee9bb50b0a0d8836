"""Status moves with their audit trail and the events stream entries they produce."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from tessera_api.errors import conflict
from tessera_api.event_hub import note_new_event
from tessera_api.models import Attempt, Event, Job, Party, StatusTransition, Task, utcnow
from tessera_api.states import (
    ATTEMPT_TERMINAL,
    JOB_TERMINAL,
    TASK_TERMINAL,
    AttemptStatus,
    Decision,
    JobStatus,
    TaskStatus,
    attempt_can_move,
    job_can_move,
    task_can_move,
)


def record_event(session: Session, *, job_id: str, kind: str, data: dict[str, Any]) -> None:
    session.add(Event(job_id=job_id, kind=kind, data=data))
    note_new_event(session, job_id)  # its streams wake once this commits, in every replica


def _audit(
    session: Session,
    *,
    job_id: str,
    entity: str,
    entity_id: str,
    before: str | None,
    after: str,
    reason: str,
) -> None:
    session.add(
        StatusTransition(
            job_id=job_id,
            entity=entity,
            entity_id=entity_id,
            from_status=before,
            to_status=after,
            reason=reason,
        )
    )
    record_event(
        session,
        job_id=job_id,
        kind=f"{entity}.status",
        data={"entity_id": entity_id, "from": before, "to": after, "reason": reason},
    )


def record_job_created(session: Session, *, job: Job) -> None:
    _audit(
        session,
        job_id=job.id,
        entity="job",
        entity_id=job.id,
        before=None,
        after=job.status,
        reason="created",
    )


def record_decision(
    session: Session, *, job_id: str, party: Party, decision: str, by: str, reason: str
) -> None:
    """A party's approval or rejection, in the audit trail and the events stream."""
    text = f"{party.name} {decision}" + (f": {reason}" if reason else "")
    session.add(
        StatusTransition(
            job_id=job_id,
            entity="approval",
            entity_id=party.id,
            from_status=Decision.pending.value,
            to_status=decision,
            reason=text if by == party.name else f"{text} (by {by})",
        )
    )
    record_event(
        session,
        job_id=job_id,
        kind="approval",
        data={"party": party.name, "decision": decision, "by": by, "reason": reason},
    )


def move_job(session: Session, *, job: Job, to: JobStatus, reason: str = "") -> None:
    """Change a job's status or raise 409 naming the current one."""
    current = JobStatus(job.status)
    if not job_can_move(current, to):
        raise conflict(
            "illegal_transition", f"job {job.id} is {current.value}; it cannot become {to.value}"
        )
    now = utcnow()
    if to is JobStatus.running:
        job.started_at = now
        job.finished_at = None
    if to in JOB_TERMINAL:
        job.finished_at = now
    if to is JobStatus.pending:
        job.started_at = None
        job.finished_at = None
    job.status = to.value
    job.status_reason = reason
    _audit(
        session,
        job_id=job.id,
        entity="job",
        entity_id=job.id,
        before=current.value,
        after=to.value,
        reason=reason,
    )


def move_attempt(
    session: Session,
    *,
    attempt: Attempt,
    to: AttemptStatus,
    reason: str = "",
    failure_code: str | None = None,
) -> None:
    current = AttemptStatus(attempt.status)
    if not attempt_can_move(current, to):
        raise conflict(
            "illegal_transition",
            f"attempt {attempt.number} is {current.value}; it cannot become {to.value}",
        )
    now = utcnow()
    if to is AttemptStatus.running:
        attempt.started_at = now
    if to in ATTEMPT_TERMINAL:
        attempt.finished_at = now
    if to is AttemptStatus.failed:
        attempt.failure_code = failure_code or "failed"
        attempt.failure_reason = reason
    attempt.status = to.value
    record = f"attempt {attempt.number}: {reason}" if reason else f"attempt {attempt.number}"
    _audit(
        session,
        job_id=attempt.job_id,
        entity="attempt",
        entity_id=attempt.id,
        before=current.value,
        after=to.value,
        reason=record,
    )


def create_task_record(session: Session, *, task: Task, job_id: str) -> None:
    _audit(
        session,
        job_id=job_id,
        entity="task",
        entity_id=task.id,
        before=None,
        after=task.status,
        reason="placed",
    )


def move_task(session: Session, *, task: Task, job_id: str, to: TaskStatus, reason: str) -> bool:
    """Change a task's status; False when it already had it, 409 when the move is illegal."""
    current = TaskStatus(task.status)
    if current == to:
        return False
    if not task_can_move(current, to):
        raise conflict(
            "illegal_transition", f"task {task.id} is {current.value}; it cannot become {to.value}"
        )
    now = utcnow()
    if to in (TaskStatus.starting, TaskStatus.running) and task.started_at is None:
        task.started_at = now
    if to in TASK_TERMINAL:
        task.finished_at = now
    task.status = to.value
    _audit(
        session,
        job_id=job_id,
        entity="task",
        entity_id=task.id,
        before=current.value,
        after=to.value,
        reason=reason,
    )
    return True
