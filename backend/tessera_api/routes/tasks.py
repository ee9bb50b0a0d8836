"""Tasks: what a worker runs for one attempt (the worker protocol)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from tessera_api.deps import CertificatesDep, PartyCaller, Principal, SessionDep
from tessera_api.errors import problem_responses
from tessera_api.routes.paging import Key
from tessera_api.schemas import (
    LaunchDescription,
    RendezvousIn,
    TaskCredentials,
    TaskCredentialsIn,
    TaskPublic,
    TaskStatusIn,
)
from tessera_api.services import lifecycle, tasks
from tessera_api.states import TaskStatus
from tessera_api.views import task_public

router = APIRouter(prefix="/tasks", tags=["tasks"])


@router.get("/{task_id}", responses=problem_responses(403, 404))
def get_task(task_id: Key, caller: Principal, session: SessionDep) -> LaunchDescription:
    """Get a task's launch description: plan, hosted ranks, rendezvous, resume point."""
    task = tasks.get_task(session, task_id=task_id, caller=caller)
    return tasks.launch_description(session, task=task)


@router.post("/{task_id}/rendezvous", status_code=204, responses=problem_responses(403, 404, 409))
def set_rendezvous(
    task_id: Key, rendezvous: RendezvousIn, caller: PartyCaller, session: SessionDep
) -> Response:
    """Publish where the attempt's world meets (the task hosting rank 0 only)."""
    task = tasks.get_task(session, task_id=task_id, caller=caller)
    tasks.set_rendezvous(session, task=task, rendezvous=rendezvous)
    session.commit()
    return Response(status_code=204)


@router.post("/{task_id}/credentials", responses=problem_responses(403, 404, 409, 422))
def issue_credentials(
    task_id: Key,
    request: TaskCredentialsIn,
    caller: PartyCaller,
    session: SessionDep,
    certificates: CertificatesDep,
) -> TaskCredentials:
    """Issue a task's certificate (its party and attempt) and its ranks' reporting token."""
    task = tasks.get_task(session, task_id=task_id, caller=caller)
    issued = tasks.issue_credentials(session, task=task, request=request, certificates=certificates)
    session.commit()
    return issued


@router.post("/{task_id}/status", responses=problem_responses(403, 404, 409, 422))
def report_status(
    task_id: Key, status_in: TaskStatusIn, caller: PartyCaller, session: SessionDep
) -> TaskPublic:
    """Report a task's status; a failure fails the attempt and the job."""
    task = tasks.get_task(session, task_id=task_id, caller=caller)
    if status_in.rank is not None:
        tasks.check_hosted(task, status_in.rank, ("body", "rank"))
    lifecycle.report_task_status(
        session,
        task=task,
        status=TaskStatus(status_in.status),
        reason=status_in.reason,
        exit_code=status_in.exit_code,
        rank=status_in.rank,
        lost_peer=status_in.lost_peer,
    )
    session.commit()
    return task_public(task)
