"""Metrics, logs and checkpoints of a job: ingest from workers, read for the dashboard."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from sqlalchemy.orm import Session

from tessera_api.deps import (
    Principal,
    ReadsDep,
    SessionDep,
    SettingsDep,
    SpecsDep,
    TaskReporter,
)
from tessera_api.errors import not_found, problem_responses
from tessera_api.routes.paging import Cursor, Key
from tessera_api.schemas import (
    AS_NAME,
    CheckpointIn,
    CheckpointPublic,
    LogBatch,
    LogLinePublic,
    LogsPublic,
    MetricBatch,
    MetricName,
    MetricsPublic,
    NameCheck,
    Step,
)
from tessera_api.security import Caller
from tessera_api.services import checkpoint_files, jobs, series, telemetry, visibility
from tessera_api.services.tasks import task_of_job

router = APIRouter(prefix="/jobs/{job_id}", tags=["telemetry"])


@router.post("/metrics", status_code=204, responses=problem_responses(403, 404, 422))
def ingest_metrics(
    job_id: Key, batch: MetricBatch, caller: TaskReporter, session: SessionDep
) -> Response:
    """Store a batch of metric points reported by one task's ranks."""
    task = task_of_job(session, job_id=job_id, task_id=batch.task_id, caller=caller)
    telemetry.ingest_metrics(session, job_id=job_id, task=task, points=batch.points)
    session.commit()
    return Response(status_code=204)


@router.get("/metrics", response_model=MetricsPublic, responses=problem_responses(403, 404))
async def query_metrics(
    job_id: Key,
    reads: ReadsDep,
    specs: SpecsDep,
    names: Annotated[list[MetricName] | None, Query(max_length=64)] = None,
    attempt: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    rank: Annotated[int | None, Query(ge=0, le=65535)] = None,
    step_min: Step | None = None,
    step_max: Step | None = None,
    max_points: Annotated[int, Query(ge=2, le=10_000)] = 1000,
) -> Response:
    """Metric series of an attempt (default: the latest), each downsampled to max_points."""
    # of other parties' ranks, only the metrics the caller's roles may see (services.visibility)

    def read(session: Session, caller: Caller) -> Response:
        job, roles = jobs.get_job_and_roles(session, job_id=job_id, caller=caller)
        chosen = jobs.attempt_number(session, job=job, number=attempt)
        if chosen is None:
            raise not_found("attempt", str(attempt))
        attempt_id, number = chosen
        view = visibility.metric_view(
            session, job=job, attempt_id=attempt_id, caller=caller, specs=specs, roles=roles
        )
        data = series.query_series(
            session,
            attempt_id=attempt_id,
            names=names or [],
            rank=rank,
            step_min=step_min,
            step_max=step_max,
            max_points=max_points,
            visible=None if view is None else view.sees,
        )
        # encoded once: a model per point would cost more than the query
        return Response(series.encode(number, data), media_type="application/json")

    return await reads(read)


@router.post("/logs", status_code=204, responses=problem_responses(403, 404, 422))
def ingest_logs(
    job_id: Key, batch: LogBatch, caller: TaskReporter, session: SessionDep
) -> Response:
    """Store a batch of log lines from one task's ranks."""
    task = task_of_job(session, job_id=job_id, task_id=batch.task_id, caller=caller)
    telemetry.ingest_logs(session, job_id=job_id, task=task, lines=batch.lines)
    session.commit()
    return Response(status_code=204)


@router.get("/logs", responses=problem_responses(403, 404))
def read_logs(
    job_id: Key,
    caller: Principal,
    session: SessionDep,
    specs: SpecsDep,
    task_id: Annotated[
        str | None, Query(max_length=64, json_schema_extra=AS_NAME), NameCheck
    ] = None,
    after: Cursor = 0,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
) -> LogsPublic:
    """Read log lines after a cursor, optionally of one task."""
    # a party whose roles may not see every metric of others reads only its own tasks' lines
    job = jobs.get_job(session, job_id=job_id, caller=caller)
    limited = visibility.patterns(session, job=job, caller=caller, specs=specs) is not None
    rows = telemetry.read_logs(
        session,
        job_id=job_id,
        task_id=task_id,
        after=after,
        limit=limit,
        party_id=caller.party.id if limited and caller.party is not None else None,
    )
    data = [LogLinePublic.model_validate(r, from_attributes=True) for r in rows]
    return LogsPublic(data=data, next_cursor=data[-1].id if data else after)


@router.post("/checkpoints", status_code=204, responses=problem_responses(403, 404, 422))
def record_checkpoint(
    job_id: Key, checkpoint: CheckpointIn, caller: TaskReporter, session: SessionDep
) -> Response:
    """Record that a rank wrote a checkpoint."""
    task = task_of_job(session, job_id=job_id, task_id=checkpoint.task_id, caller=caller)
    telemetry.record_checkpoint(session, job_id=job_id, task=task, checkpoint=checkpoint)
    session.commit()
    return Response(status_code=204)


@router.get("/checkpoints", responses=problem_responses(403, 404))
def list_checkpoints(
    job_id: Key, caller: Principal, session: SessionDep, settings: SettingsDep
) -> list[CheckpointPublic]:
    """List the checkpoints every attempt of a job recorded and whether each file is shared."""
    jobs.get_job(session, job_id=job_id, caller=caller)
    root = settings.resolved_artifacts_dir
    return [
        CheckpointPublic(
            attempt=number,
            rank=c.rank,
            step=c.step,
            uri=c.uri,
            size=c.size,
            sha256=c.sha256,
            created_at=c.created_at,
            kind=c.kind,
            party=party,
            shared=checkpoint_files.is_shared(
                root, job_id=job_id, attempt=number, kind=c.kind, step=c.step, rank=c.rank
            ),
        )
        for c, number, party in telemetry.list_checkpoints(session, job_id=job_id)
    ]
