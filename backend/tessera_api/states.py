"""The job, attempt and task state machines: the only place that says which moves are legal."""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    pending = "pending"
    queued = "queued"
    running = "running"
    cancelling = "cancelling"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"
    rejected = "rejected"


class AttemptStatus(StrEnum):
    pending = "pending"
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


class TaskStatus(StrEnum):
    assigned = "assigned"
    starting = "starting"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


class Decision(StrEnum):
    """A party's answer to a job it holds a role in."""

    pending = "pending"
    approved = "approved"
    rejected = "rejected"


JOB_TERMINAL = frozenset(
    {JobStatus.succeeded, JobStatus.failed, JobStatus.cancelled, JobStatus.rejected}
)
ATTEMPT_TERMINAL = frozenset(
    {AttemptStatus.succeeded, AttemptStatus.failed, AttemptStatus.cancelled}
)
TASK_TERMINAL = frozenset({TaskStatus.succeeded, TaskStatus.failed, TaskStatus.cancelled})

# A job is pending until every party in it approved; a rejection ends it. Retry moves a terminal
# job back to pending with a fresh attempt; the dispatcher queues it once it is approved.
JOB_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.pending: frozenset({JobStatus.queued, JobStatus.cancelled, JobStatus.rejected}),
    JobStatus.queued: frozenset({JobStatus.running, JobStatus.cancelled, JobStatus.failed}),
    JobStatus.running: frozenset(
        {JobStatus.succeeded, JobStatus.failed, JobStatus.cancelling, JobStatus.cancelled}
    ),
    JobStatus.cancelling: frozenset({JobStatus.cancelled}),
    JobStatus.succeeded: frozenset({JobStatus.pending}),
    JobStatus.failed: frozenset({JobStatus.pending}),
    JobStatus.cancelled: frozenset({JobStatus.pending}),
    JobStatus.rejected: frozenset({JobStatus.pending}),
}

ATTEMPT_TRANSITIONS: dict[AttemptStatus, frozenset[AttemptStatus]] = {
    AttemptStatus.pending: frozenset({AttemptStatus.queued, AttemptStatus.cancelled}),
    AttemptStatus.queued: frozenset(
        {AttemptStatus.running, AttemptStatus.cancelled, AttemptStatus.failed}
    ),
    AttemptStatus.running: frozenset(
        {AttemptStatus.succeeded, AttemptStatus.failed, AttemptStatus.cancelled}
    ),
    AttemptStatus.succeeded: frozenset(),
    AttemptStatus.failed: frozenset(),
    AttemptStatus.cancelled: frozenset(),
}

TASK_TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.assigned: frozenset(
        {
            TaskStatus.starting,
            TaskStatus.running,
            TaskStatus.succeeded,
            TaskStatus.failed,
            TaskStatus.cancelled,
        }
    ),
    TaskStatus.starting: frozenset(
        {TaskStatus.running, TaskStatus.succeeded, TaskStatus.failed, TaskStatus.cancelled}
    ),
    TaskStatus.running: frozenset({TaskStatus.succeeded, TaskStatus.failed, TaskStatus.cancelled}),
    TaskStatus.succeeded: frozenset(),
    TaskStatus.failed: frozenset(),
    TaskStatus.cancelled: frozenset(),
}


def job_can_move(current: JobStatus, target: JobStatus) -> bool:
    return target in JOB_TRANSITIONS[current]


def attempt_can_move(current: AttemptStatus, target: AttemptStatus) -> bool:
    return target in ATTEMPT_TRANSITIONS[current]


def task_can_move(current: TaskStatus, target: TaskStatus) -> bool:
    return target == current or target in TASK_TRANSITIONS[current]
