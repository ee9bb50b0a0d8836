"""The transition tables: every pair of states is either legal or refused."""

from __future__ import annotations

import itertools

import pytest

from tessera_api.states import (
    JOB_TERMINAL,
    JOB_TRANSITIONS,
    TASK_TERMINAL,
    JobStatus,
    TaskStatus,
    job_can_move,
    task_can_move,
)

LEGAL_JOB_MOVES = {
    ("pending", "queued"),
    ("pending", "cancelled"),
    ("pending", "rejected"),
    ("queued", "running"),
    ("queued", "cancelled"),
    ("queued", "failed"),
    ("running", "succeeded"),
    ("running", "failed"),
    ("running", "cancelling"),
    ("running", "cancelled"),
    ("cancelling", "cancelled"),
    ("succeeded", "pending"),
    ("failed", "pending"),
    ("cancelled", "pending"),
    ("rejected", "pending"),
}


@pytest.mark.parametrize(("a", "b"), list(itertools.product(JobStatus, JobStatus)))
def test_job_move_is_legal_exactly_when_listed(a: JobStatus, b: JobStatus) -> None:
    assert job_can_move(a, b) == ((a.value, b.value) in LEGAL_JOB_MOVES)


def test_only_retry_leaves_a_terminal_job() -> None:
    for status in JOB_TERMINAL:
        assert JOB_TRANSITIONS[status] == {JobStatus.pending}


def test_terminal_tasks_never_move() -> None:
    for a, b in itertools.product(TASK_TERMINAL, TaskStatus):
        assert task_can_move(a, b) == (a == b)


def test_tasks_move_forward_only() -> None:
    assert task_can_move(TaskStatus.assigned, TaskStatus.running)
    assert task_can_move(TaskStatus.running, TaskStatus.failed)
    assert not task_can_move(TaskStatus.running, TaskStatus.starting)
    assert not task_can_move(TaskStatus.running, TaskStatus.assigned)
