"""Jobs: create, read, list, tag, cancel, retry, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tessera_api.deps import DispatcherDep, Principal, ReadsDep, SessionDep, SpecsDep
from tessera_api.dispatch import Dispatcher
from tessera_api.errors import problem_responses
from tessera_api.models import Job, StatusTransition
from tessera_api.routes.encoded import encoded
from tessera_api.routes.paging import Key, Limit, Name63Query, Offset
from tessera_api.schemas import (
    AS_NAME,
    ApprovalIn,
    JobCreate,
    JobPublic,
    JobRetry,
    JobSummary,
    JobTagsIn,
    NameCheck,
    Page,
    TransitionPublic,
)
from tessera_api.schemas.jobs import MAX_TAG_LENGTH, TAG_PATTERN, TagCheck
from tessera_api.security import Caller
from tessera_api.services import approvals, jobs, lifecycle
from tessera_api.services.jobs import JobSort
from tessera_api.states import JobStatus
from tessera_api.views import job_public, job_summaries

router = APIRouter(prefix="/jobs", tags=["jobs"])

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="Repeat a create safely: the same key returns the same job",
    ),
]

TagQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_TAG_LENGTH,
        description="Only jobs carrying this tag (the whole tag, as written)",
        json_schema_extra={"pattern": TAG_PATTERN},
    ),
    TagCheck,
]


@router.post(
    "",
    status_code=201,
    responses={
        200: {"model": JobPublic, "description": "Replayed: the job the Idempotency-Key made"},
        **problem_responses(403, 409),
    },
)
def create_job(
    job_in: JobCreate,
    caller: Principal,
    session: SessionDep,
    specs: SpecsDep,
    dispatcher: DispatcherDep,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    """Create a job from an algorithm, its configuration and role assignments."""
    try:
        job, created = jobs.create_job(
            session, job_in=job_in, caller=caller, specs=specs, idempotency_key=idempotency_key
        )
        session.commit()
    except IntegrityError:
        if idempotency_key is None:
            raise
        # a concurrent request with the same key won the race: answer with its job
        session.rollback()
        job, created = jobs.create_job(
            session, job_in=job_in, caller=caller, specs=specs, idempotency_key=idempotency_key
        )
    if created:
        dispatcher.submit(session, job_id=job.id)
        session.commit()
    else:
        response.status_code = 200
    session.refresh(job)
    return job_public(job)


@router.get("", response_model=Page[JobSummary])
async def list_jobs(
    reads: ReadsDep,
    status: JobStatus | None = None,
    algorithm: Name63Query = None,
    party: Name63Query = None,
    q: Annotated[
        str | None,
        Query(max_length=200, description="Part of the job's name", json_schema_extra=AS_NAME),
        NameCheck,
    ] = None,
    sort: JobSort = "-created_at",
    awaiting_approval: Annotated[
        bool,
        Query(description="Only pending jobs the calling party (admin: any party) has to answer"),
    ] = False,
    tag: TagQuery = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Response:
    """List the jobs the caller may see, filtered and sorted."""

    def read(session: Session, caller: Caller) -> Response:
        rows, total = jobs.list_jobs(
            session,
            caller=caller,
            status=status,
            algorithm=algorithm,
            party=party,
            name_contains=q,
            sort=sort,
            limit=limit,
            offset=offset,
            awaiting_approval=awaiting_approval,
            tag=tag,
        )
        return encoded(Page[JobSummary](data=job_summaries(session, rows), count=total))

    return await reads(read)


@router.get("/{job_id}", response_model=JobPublic, responses=problem_responses(403, 404))
async def get_job(job_id: Key, reads: ReadsDep) -> Response:
    """Get a job with its assignments, attempts and per-task status."""

    def read(session: Session, caller: Caller) -> Response:
        job = jobs.get_job(session, job_id=job_id, caller=caller, with_tasks=True)
        return encoded(job_public(job))

    return await reads(read)


@router.put("/{job_id}/tags", responses=problem_responses(403, 404))
def set_job_tags(
    job_id: Key, tags_in: JobTagsIn, caller: Principal, session: SessionDep
) -> JobPublic:
    """Replace a job's tags (the admin and the party that created the job may)."""
    job = jobs.get_job(session, job_id=job_id, caller=caller)
    jobs.set_tags(session, job=job, tags=tags_in.tags, caller=caller)
    session.commit()
    session.refresh(job)
    return job_public(job)


@router.post("/{job_id}/cancel", responses=problem_responses(403, 404, 409))
def cancel_job(
    job_id: Key, caller: Principal, session: SessionDep, dispatcher: DispatcherDep
) -> JobPublic:
    """Cancel a job: at once if nothing runs, else after its tasks have stopped."""
    job = jobs.get_job(session, job_id=job_id, caller=caller)
    lifecycle.cancel_job(session, job=job)
    session.commit()
    dispatcher.cancel(session, job_id=job.id)
    session.commit()
    session.refresh(job)
    return job_public(job)


@router.post("/{job_id}/retry", responses=problem_responses(403, 404, 409, 422))
def retry_job(
    job_id: Key,
    caller: Principal,
    session: SessionDep,
    dispatcher: DispatcherDep,
    specs: SpecsDep,
    retry_in: JobRetry | None = None,
) -> JobPublic:
    """Run a finished job again as a new attempt, from a checkpoint; consent is asked again."""
    job = jobs.get_job(session, job_id=job_id, caller=caller)
    lifecycle.retry_job(session, job=job, step=retry_in.step if retry_in else None)
    approvals.reopen(session, job=job, caller=caller, specs=specs)
    return _submitted(session, dispatcher, job)


@router.post("/{job_id}/approve", responses=problem_responses(403, 404, 409))
def approve_job(
    job_id: Key,
    caller: Principal,
    session: SessionDep,
    specs: SpecsDep,
    dispatcher: DispatcherDep,
    approval_in: ApprovalIn | None = None,
) -> JobPublic:
    """Approve a pending job for the calling party; the last approval queues it."""
    job = jobs.get_job(session, job_id=job_id, caller=caller, hidden_as_missing=True)
    reason = approval_in.reason if approval_in else ""
    approvals.decide(session, job=job, caller=caller, approve=True, reason=reason, specs=specs)
    return _submitted(session, dispatcher, job)


def _submitted(session: Session, dispatcher: Dispatcher, job: Job) -> JobPublic:
    """Commit what the route changed, hand the job to the dispatcher (which queues it once
    every party approved) and answer with the job as it now stands."""
    session.commit()
    dispatcher.submit(session, job_id=job.id)
    session.commit()
    session.refresh(job)
    return job_public(job)


@router.post("/{job_id}/reject", responses=problem_responses(403, 404, 409))
def reject_job(
    job_id: Key,
    caller: Principal,
    session: SessionDep,
    specs: SpecsDep,
    approval_in: ApprovalIn | None = None,
) -> JobPublic:
    """Reject a pending job for the calling party: the job ends as rejected, with the reason."""
    job = jobs.get_job(session, job_id=job_id, caller=caller, hidden_as_missing=True)
    reason = approval_in.reason if approval_in else ""
    approvals.decide(session, job=job, caller=caller, approve=False, reason=reason, specs=specs)
    session.commit()
    session.refresh(job)
    return job_public(job)


@router.delete("/{job_id}", status_code=204, responses=problem_responses(403, 404, 409))
def delete_job(job_id: Key, caller: Principal, session: SessionDep) -> Response:
    """Delete a finished job with everything it recorded."""
    job = jobs.get_job(session, job_id=job_id, caller=caller)
    jobs.delete_job(session, job=job)
    session.commit()
    return Response(status_code=204)


@router.get("/{job_id}/transitions", responses=problem_responses(403, 404))
def list_transitions(job_id: Key, caller: Principal, session: SessionDep) -> list[TransitionPublic]:
    """The audit trail of a job's, its attempts' and its tasks' status changes."""
    jobs.get_job(session, job_id=job_id, caller=caller)
    rows = session.scalars(
        select(StatusTransition)
        .where(StatusTransition.job_id == job_id)
        .order_by(StatusTransition.id)
    ).all()
    return [TransitionPublic.model_validate(r, from_attributes=True) for r in rows]
