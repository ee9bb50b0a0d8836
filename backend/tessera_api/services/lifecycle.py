"""How jobs move: queueing, starting an attempt on placed tasks, task reports, cancel, retry.

These are the functions a scheduler calls; each keeps job, attempt and tasks consistent.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from tessera_api.errors import conflict, invalid, not_found
from tessera_api.models import (
    ARTIFACT_CHECKPOINT,
    Attempt,
    Checkpoint,
    Job,
    Party,
    RoleAssignment,
    Task,
    Worker,
)
from tessera_api.services.history import (
    create_task_record,
    move_attempt,
    move_job,
    move_task,
    record_event,
)
from tessera_api.states import (
    ATTEMPT_TERMINAL,
    JOB_TERMINAL,
    TASK_TERMINAL,
    AttemptStatus,
    JobStatus,
    TaskStatus,
)

DEVICE = re.compile(r"^(cpu|cuda(:\d{1,3})?|mps)$")


@dataclass(frozen=True)
class RankDevice:
    """A rank's device, and the backend it talks to the other ranks of its party with."""

    rank: int
    device: str
    backend: str = "gloo"


@dataclass(frozen=True)
class Placement:
    """The ranks one worker of one party hosts in an attempt, each with its device."""

    party: str
    worker_id: str
    ranks: Sequence[RankDevice]


def backend_for(device: str) -> str:
    """The backend a rank on ``device`` uses inside its party (a party's ranks share one)."""
    return "nccl" if device.startswith("cuda") else "gloo"


def current_attempt(job: Job) -> Attempt:
    assert job.attempts, "every job has at least one attempt"
    return job.attempts[-1]


def lock_job(session: Session, *, job_id: str) -> Job:
    """The job, locked until the transaction ends, with everything in the session read afresh.

    Every status change of a job, its attempts and its tasks is made under this lock, so the
    scheduler and concurrent requests (two parties' tasks finishing at once, a cancel while the
    job is being placed) see each other's changes instead of overwriting them. The lock is an
    UPDATE that changes nothing: a row lock on PostgreSQL, the database's write lock on SQLite.
    """
    session.flush()
    session.execute(
        update(Job)
        .where(Job.id == job_id)
        .values(status=Job.status)
        .execution_options(synchronize_session=False)
    )
    session.expire_all()
    job = session.get(Job, job_id)
    if job is None:
        raise not_found("job", job_id)
    return job


def queue_job(session: Session, *, job_id: str, reason: str = "waiting for placement") -> Job:
    """pending → queued, with its current attempt."""
    job = lock_job(session, job_id=job_id)
    move_job(session, job=job, to=JobStatus.queued, reason=reason)
    move_attempt(session, attempt=current_attempt(job), to=AttemptStatus.queued)
    session.flush()
    return job


def set_queued_reason(session: Session, *, job_id: str, reason: str) -> None:
    """Say why a queued job is still waiting (e.g. ``waiting for a worker of party bob``)."""
    known = session.get(Job, job_id)
    if known is not None and (known.status, known.status_reason) == (JobStatus.queued, reason):
        return
    job = lock_job(session, job_id=job_id)
    if JobStatus(job.status) is not JobStatus.queued:
        raise conflict("illegal_transition", f"job {job_id} is {job.status}, not queued")
    if job.status_reason != reason:
        job.status_reason = reason
        record_event(
            session, job_id=job.id, kind="job.reason", data={"status": job.status, "reason": reason}
        )
        session.flush()


def queued_jobs(session: Session, *, limit: int = 100) -> list[Job]:
    """Queued jobs in the order a scheduler should try them: priority, then age."""
    rows = session.scalars(
        select(Job)
        .where(Job.status == JobStatus.queued.value)
        .order_by(Job.priority.desc(), Job.created_at, Job.id)
        .limit(limit)
    ).all()
    return list(rows)


def fail_queued(session: Session, *, job_id: str, code: str, reason: str) -> Job:
    """A queued job that can never be placed fails with its attempt (e.g. no such device)."""
    job = lock_job(session, job_id=job_id)
    if JobStatus(job.status) is not JobStatus.queued:
        raise conflict("illegal_transition", f"job {job_id} is {job.status}, not queued")
    attempt = current_attempt(job)
    move_attempt(
        session, attempt=attempt, to=AttemptStatus.failed, reason=reason, failure_code=code
    )
    move_job(session, job=job, to=JobStatus.failed, reason=reason)
    session.flush()
    return job


def start_attempt(session: Session, *, job_id: str, placements: Sequence[Placement]) -> Attempt:
    """Create one task per placement and move the queued job and its attempt to running."""
    job = lock_job(session, job_id=job_id)
    if JobStatus(job.status) is not JobStatus.queued:
        raise conflict("illegal_transition", f"job {job_id} is {job.status}; it cannot start")
    attempt = current_attempt(job)
    _check_placements(session, attempt=attempt, placements=placements)
    attempt.rendezvous_secret = secrets.token_hex(32)
    for placement in placements:
        party = session.scalars(select(Party).where(Party.name == placement.party)).one()
        task = Task(
            attempt_id=attempt.id,
            party_id=party.id,
            worker_id=placement.worker_id,
            ranks=[
                {"rank": r.rank, "device": r.device, "backend": r.backend} for r in placement.ranks
            ],
            status=TaskStatus.assigned.value,
        )
        attempt.tasks.append(task)
        session.flush()
        create_task_record(session, task=task, job_id=job.id)
    move_attempt(session, attempt=attempt, to=AttemptStatus.running)
    move_job(session, job=job, to=JobStatus.running, reason=f"attempt {attempt.number} started")
    session.flush()
    return attempt


def _check_placements(
    session: Session, *, attempt: Attempt, placements: Sequence[Placement]
) -> None:
    party_of_rank = {int(s["rank"]): str(s["party"]) for s in attempt.plan}
    placed: set[int] = set()
    workers: set[tuple[str, str]] = set()
    for placement in placements:
        worker = session.get(Worker, placement.worker_id)
        if worker is None or worker.party.name != placement.party:
            raise invalid(
                "bad_placement",
                f"worker {placement.worker_id} is not a worker of party {placement.party!r}",
            )
        if (placement.party, placement.worker_id) in workers:
            raise invalid("bad_placement", f"worker {placement.worker_id} is placed twice")
        workers.add((placement.party, placement.worker_id))
        for r in placement.ranks:
            if party_of_rank.get(r.rank) != placement.party or r.rank in placed:
                raise invalid(
                    "bad_placement", f"rank {r.rank} cannot be placed on party {placement.party!r}"
                )
            if not DEVICE.match(r.device):
                raise invalid("bad_placement", f"unknown device {r.device!r} for rank {r.rank}")
            if r.backend != backend_for(r.device):
                raise invalid(
                    "bad_placement", f"rank {r.rank} on {r.device} cannot use {r.backend}"
                )
            placed.add(r.rank)
    missing = sorted(set(party_of_rank) - placed)
    if missing:
        raise invalid("bad_placement", f"ranks {missing} are not placed")
    backends: dict[str, set[str]] = {}
    for placement in placements:
        backends.setdefault(placement.party, set()).update(r.backend for r in placement.ranks)
    for party, used in backends.items():
        if len(used) > 1:
            raise invalid(
                "bad_placement", f"ranks of party {party!r} would mix {' and '.join(sorted(used))}"
            )


def report_task_status(
    session: Session,
    *,
    task: Task,
    status: TaskStatus,
    reason: str | None,
    exit_code: int | None,
    rank: int | None,
    lost_peer: bool = False,
) -> Task:
    """A worker's report about one task, with its consequences for the attempt and the job.

    A failure that only reports a lost peer (``lost_peer``) does not fail the attempt while
    other tasks of it still run: the scheduler first looks for the worker that went silent,
    to blame that one (``Scheduler._blame_lost_peers``)."""
    attempt = task.attempt
    job = lock_job(session, job_id=attempt.job_id)
    starts = status in (TaskStatus.starting, TaskStatus.running)
    if starts and status != TaskStatus(task.status) and not _running(job, attempt):
        raise conflict(
            "attempt_not_running",
            f"job {job.id} is {job.status} (attempt {attempt.number} {attempt.status}); "
            f"task {task.id} must not start",
        )
    text = reason or (f"exit code {exit_code}" if exit_code is not None else status.value)
    if not move_task(session, task=task, job_id=job.id, to=status, reason=text):
        return task
    if status in TASK_TERMINAL:
        task.exit_code = exit_code
        task.reason = reason
    if status is TaskStatus.failed:
        task.failed_rank = rank
        task.lost_peer = lost_peer
        others = [t for t in attempt.tasks if t.id != task.id]
        if not (lost_peer and any(TaskStatus(t.status) not in TASK_TERMINAL for t in others)):
            fail_attempt_by(session, job=job, task=task)
    elif status is TaskStatus.cancelled and _running(job, attempt):
        _fail_attempt(
            session,
            job=job,
            attempt=attempt,
            task=task,
            code="task_cancelled",
            text=reason or "the task stopped before the job finished",
        )
    elif status is TaskStatus.succeeded and _all_succeeded(job, attempt):
        move_attempt(session, attempt=attempt, to=AttemptStatus.succeeded)
        move_job(session, job=job, to=JobStatus.succeeded, reason="every task succeeded")
    _settle_cancel(session, job=job)
    session.flush()
    return task


def fail_attempt_by(session: Session, *, job: Job, task: Task) -> None:
    """Fail ``task``'s attempt (if it still runs) with that task's failure as the reason."""
    text = task.reason or (
        f"exit code {task.exit_code}" if task.exit_code is not None else "failed"
    )
    _fail_attempt(session, job=job, attempt=task.attempt, task=task, code="task_failed", text=text)


def _running(job: Job, attempt: Attempt) -> bool:
    return job.status == JobStatus.running and attempt.status == AttemptStatus.running


def _all_succeeded(job: Job, attempt: Attempt) -> bool:
    return _running(job, attempt) and all(
        TaskStatus(t.status) is TaskStatus.succeeded for t in attempt.tasks
    )


def _fail_attempt(
    session: Session, *, job: Job, attempt: Attempt, task: Task, code: str, text: str
) -> None:
    if not _running(job, attempt):
        return
    ranks = [int(r["rank"]) for r in task.ranks]
    where = f"rank {task.failed_rank}" if task.failed_rank is not None else _ranks_text(ranks)
    why = f"party {task.party.name} {where}: {text}"
    move_attempt(session, attempt=attempt, to=AttemptStatus.failed, reason=why, failure_code=code)
    move_job(session, job=job, to=JobStatus.failed, reason=why)


def _ranks_text(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))}"


def _settle_cancel(session: Session, *, job: Job) -> None:
    """A cancelling job becomes cancelled once no task of its current attempt runs any more."""
    if JobStatus(job.status) is not JobStatus.cancelling:
        return
    attempt = current_attempt(job)
    if any(TaskStatus(t.status) not in TASK_TERMINAL for t in attempt.tasks):
        return
    if AttemptStatus(attempt.status) not in ATTEMPT_TERMINAL:
        move_attempt(session, attempt=attempt, to=AttemptStatus.cancelled, reason="cancelled")
    move_job(session, job=job, to=JobStatus.cancelled, reason="every task stopped")


def cancel_job(session: Session, *, job: Job) -> Job:
    """pending/queued → cancelled; running → cancelling until its started tasks stop.

    Tasks still ``assigned`` (their message waits in a worker's queue) are cancelled at once: a
    worker that picks one up later skips it, or is refused ``starting``, and launches nothing.
    With no started task left the job is cancelled at once.
    """
    job = lock_job(session, job_id=job.id)
    attempt = current_attempt(job)
    status = JobStatus(job.status)
    if status is JobStatus.cancelling:
        raise conflict("illegal_transition", f"job {job.id} is cancelling already")
    if status is JobStatus.running:
        for task in attempt.tasks:
            if TaskStatus(task.status) is TaskStatus.assigned:
                reason = "cancelled before it started"
                move_task(session, task=task, job_id=job.id, to=TaskStatus.cancelled, reason=reason)
                task.reason = reason
        live = [t for t in attempt.tasks if TaskStatus(t.status) not in TASK_TERMINAL]
        if live:
            move_job(session, job=job, to=JobStatus.cancelling, reason="cancel requested")
            session.flush()
            return job
    move_job(session, job=job, to=JobStatus.cancelled, reason="cancelled")
    if AttemptStatus(attempt.status) not in ATTEMPT_TERMINAL:
        move_attempt(session, attempt=attempt, to=AttemptStatus.cancelled, reason="cancelled")
    session.flush()
    return job


def retry_job(session: Session, *, job: Job, step: int | None) -> Attempt:
    """A terminal job gets a fresh pending attempt, resuming from a checkpoint when there is one."""
    job = lock_job(session, job_id=job.id)
    if JobStatus(job.status) not in JOB_TERMINAL:
        raise conflict(
            "illegal_transition", f"job {job.id} is {job.status}; only finished jobs can be retried"
        )
    previous = current_attempt(job)
    world_size = len(previous.plan)
    resume = _resume_point(session, job_id=job.id, world_size=world_size, step=step)
    attempt = Attempt(
        number=previous.number + 1,
        status=AttemptStatus.pending.value,
        plan=list(previous.plan),
        resume_step=resume[0] if resume else None,
        resume_uri=resume[1] if resume else None,
    )
    job.attempts.append(attempt)
    session.flush()
    reason = f"retry from step {resume[0]}" if resume else "retry"
    move_job(session, job=job, to=JobStatus.pending, reason=reason)
    session.flush()
    return attempt


def _resume_point(
    session: Session, *, job_id: str, world_size: int, step: int | None
) -> tuple[int, str] | None:
    complete = (
        select(Checkpoint.step)
        .where(Checkpoint.job_id == job_id, Checkpoint.kind == ARTIFACT_CHECKPOINT)
        .group_by(Checkpoint.step)
        .having(func.count(func.distinct(Checkpoint.rank)) >= world_size)
    )
    if step is not None:
        if session.scalar(complete.where(Checkpoint.step == step)) is None:
            raise invalid(
                "unknown_checkpoint",
                f"no checkpoint of every rank at step {step}",
                ("body", "step"),
            )
        chosen: int | None = step
    else:
        chosen = session.scalar(complete.order_by(Checkpoint.step.desc()).limit(1))
    if chosen is None:
        return None
    uri = session.scalar(
        select(Checkpoint.uri)
        .where(
            Checkpoint.job_id == job_id,
            Checkpoint.step == chosen,
            Checkpoint.kind == ARTIFACT_CHECKPOINT,
        )
        .order_by(Checkpoint.rank, Checkpoint.id.desc())
        .limit(1)
    )
    assert uri is not None
    return chosen, uri


def cut_off_party(session: Session, *, party: Party) -> list[str]:
    """A disabled party leaves every unfinished job it holds a role in; returns their ids.

    Running attempts fail, naming the party, so the other parties' ranks stop at their next
    heartbeat; jobs not yet started are cancelled."""
    reason = f"party {party.name} was disabled: its workers are cut off"
    held = select(RoleAssignment.job_id).where(RoleAssignment.party_id == party.id)
    live = [s.value for s in JobStatus if s not in JOB_TERMINAL]
    ended: list[str] = []
    for job_id in session.scalars(select(Job.id).where(Job.id.in_(held), Job.status.in_(live))):
        job = lock_job(session, job_id=job_id)
        attempt = current_attempt(job)
        status = JobStatus(job.status)
        if status in (JobStatus.running, JobStatus.cancelling):
            for task in attempt.tasks:
                if task.party_id == party.id and TaskStatus(task.status) not in TASK_TERMINAL:
                    report_task_status(
                        session,
                        task=task,
                        status=TaskStatus.failed,
                        reason=reason,
                        exit_code=None,
                        rank=None,
                    )
        else:
            if AttemptStatus(attempt.status) not in ATTEMPT_TERMINAL:
                move_attempt(session, attempt=attempt, to=AttemptStatus.cancelled, reason=reason)
            move_job(session, job=job, to=JobStatus.cancelled, reason=reason)
        ended.append(job_id)
    session.flush()
    return ended
