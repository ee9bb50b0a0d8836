"""Database rows turned into the API's response shapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import BindParameter, Integer, Select, bindparam, literal_column, select, union_all
from sqlalchemy.orm import Session

from tessera_api.models import Approval, Attempt, Job, Party, RoleAssignment, Task, Worker
from tessera_api.schemas import (
    Accelerator,
    ApprovalPublic,
    AssignmentPublic,
    AttemptPublic,
    JobPublic,
    JobSummary,
    PartyPublic,
    RankDevicePublic,
    ResumePoint,
    TaskPublic,
    WorkerPublic,
    WorkerTaskPublic,
)
from tessera_api.states import Decision


def party_public(party: Party) -> PartyPublic:
    return PartyPublic(
        id=party.id,
        name=party.name,
        display_name=party.display_name,
        description=party.description,
        created_at=party.created_at,
        disabled=party.disabled,
    )


def worker_public(
    worker: Worker, *, online: bool, running_tasks: Sequence[WorkerTaskPublic] = ()
) -> WorkerPublic:
    return WorkerPublic(
        id=worker.id,
        party=worker.party.name,
        hostname=worker.hostname,
        address=worker.address,
        cpu_count=worker.cpu_count,
        memory_bytes=worker.memory_bytes,
        torch_version=worker.torch_version,
        accelerators=[Accelerator.model_validate(a) for a in worker.accelerators],
        registered_at=worker.registered_at,
        last_heartbeat=worker.last_heartbeat,
        online=online,
        running_tasks=list(running_tasks),
        certificate_expires_at=worker.certificate_expires_at,
    )


def rank_roles(attempt: Attempt) -> dict[int, str]:
    """Each global rank's role, from the attempt's plan."""
    return {int(slot["rank"]): str(slot["role"]) for slot in attempt.plan}


def rank_backend(rank: Mapping[str, Any]) -> str:
    """The backend a placed rank talks to its party with (records from before backends were
    stored: NCCL on a GPU, else gloo)."""
    if rank.get("backend"):
        return str(rank["backend"])
    return "nccl" if str(rank.get("device", "cpu")).startswith("cuda") else "gloo"


def task_public(task: Task, roles: Mapping[int, str] | None = None) -> TaskPublic:
    roles = rank_roles(task.attempt) if roles is None else roles
    return TaskPublic(
        id=task.id,
        party=task.party.name,
        worker_id=task.worker_id,
        ranks=[
            RankDevicePublic.model_validate(
                {**r, "role": roles.get(int(r["rank"])), "backend": rank_backend(r)}
            )
            for r in task.ranks
        ],
        status=task.status,
        reason=task.reason,
        exit_code=task.exit_code,
        failed_rank=task.failed_rank,
        created_at=task.created_at,
        started_at=task.started_at,
        finished_at=task.finished_at,
    )


def resume_point(attempt: Attempt) -> ResumePoint | None:
    """The checkpoint an attempt resumes from, if any."""
    if attempt.resume_step is None or attempt.resume_uri is None:
        return None
    return ResumePoint(step=attempt.resume_step, uri=attempt.resume_uri)


def attempt_public(attempt: Attempt) -> AttemptPublic:
    roles = rank_roles(attempt)
    return AttemptPublic(
        number=attempt.number,
        status=attempt.status,
        created_at=attempt.created_at,
        started_at=attempt.started_at,
        finished_at=attempt.finished_at,
        failure_code=attempt.failure_code,
        failure_reason=attempt.failure_reason,
        resume_from=resume_point(attempt),
        tasks=[task_public(t, roles) for t in attempt.tasks],
    )


def _parties_of_jobs() -> Select[tuple[str, str, int, Any]]:
    """The parties of the jobs ``:ids``: each job's assigned ones (kind 0, in assignment order),
    then those asked for an approval they have not given (kind 1)."""
    ids: BindParameter[str] = bindparam("ids", expanding=True)
    assigned = (
        select(
            RoleAssignment.job_id,
            Party.name,
            literal_column("0", Integer).label("kind"),
            RoleAssignment.position,
        )
        .join(Party, RoleAssignment.party_id == Party.id)
        .where(RoleAssignment.job_id.in_(ids))
    )
    asked = (
        select(Approval.job_id, Party.name, literal_column("1", Integer), Approval.id)
        .join(Party, Approval.party_id == Party.id)
        .where(Approval.job_id.in_(ids), Approval.decision == Decision.pending.value)
    )
    both = union_all(assigned, asked).subquery()
    return select(both).order_by(both.c.job_id, both.c.kind, both.c.position)


_PARTIES_OF_JOBS = _parties_of_jobs()
"""Built once: building it took longer than running it."""


def job_summaries(session: Session, jobs: Sequence[Job]) -> list[JobSummary]:
    """``job_summary`` of each of ``jobs``, with the parties of all of them (assigned, and asked
    for an approval they have not given) read in one query of names rather than two loads of
    rows (assignments, approvals) per job."""
    ids = [job.id for job in jobs]
    if not ids:
        return []
    parties: dict[str, list[str]] = {job_id: [] for job_id in ids}
    waiting: dict[str, list[str]] = {job_id: [] for job_id in ids}
    for job_id, name, kind, _ in session.execute(_PARTIES_OF_JOBS, {"ids": ids}):
        (waiting if kind else parties)[job_id].append(name)
    return [
        JobSummary.model_validate(
            {
                **_job_fields(job),
                "parties": list(dict.fromkeys(parties[job.id])),
                "waiting_for": waiting[job.id],
            }
        )
        for job in jobs
    ]


def job_summary(job: Job) -> JobSummary:
    return JobSummary.model_validate(_summary_fields(job))


def _summary_fields(job: Job) -> dict[str, object]:
    return {
        **_job_fields(job),
        "parties": list(dict.fromkeys(a.party.name for a in job.assignments)),
        "waiting_for": [a.party.name for a in job.approvals if a.decision == "pending"],
    }


def _job_fields(job: Job) -> dict[str, object]:
    return {
        "id": job.id,
        "name": job.name,
        "algorithm": job.algorithm,
        "status": job.status,
        "status_reason": job.status_reason,
        "priority": job.priority,
        "device": job.device,
        "tags": job.tags,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "creator": job.creator,
    }


def approval_public(approval: Approval) -> ApprovalPublic:
    return ApprovalPublic.model_validate(
        {
            "party": approval.party.name,
            "decision": approval.decision,
            "reason": approval.reason,
            "decided_by": approval.decided_by,
            "decided_at": approval.decided_at,
        }
    )


def job_public(job: Job) -> JobPublic:
    return JobPublic.model_validate(
        {
            **_summary_fields(job),
            "config": job.config,
            "assignments": [
                AssignmentPublic(
                    party=a.party.name,
                    role=a.role,
                    processes=a.processes,
                    dataset=a.dataset,
                    capacity=a.capacity,
                    options=a.options,
                )
                for a in job.assignments
            ],
            "approvals": [approval_public(a) for a in job.approvals],
            "attempts": [attempt_public(a) for a in job.attempts],
        }
    )
