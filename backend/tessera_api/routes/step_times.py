"""When a job's steps happened: what charts over wall-clock time map steps with."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from sqlalchemy.orm import Session

from tessera_api.deps import ReadsDep
from tessera_api.errors import not_found, problem_responses
from tessera_api.routes.encoded import encoded
from tessera_api.routes.paging import Key
from tessera_api.schemas.digests import StepTimes
from tessera_api.security import Caller
from tessera_api.services import jobs
from tessera_api.services.digests import step_times

router = APIRouter(prefix="/jobs/{job_id}", tags=["telemetry"])


@router.get("/step-times", response_model=StepTimes, responses=problem_responses(403, 404))
async def read_step_times(
    job_id: Key,
    reads: ReadsDep,
    attempt: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    max_points: Annotated[int, Query(ge=2, le=10_000)] = 1000,
) -> Response:
    """When each step of an attempt (default: the latest) was first reported."""

    def read(session: Session, caller: Caller) -> Response:
        job = jobs.get_job(session, job_id=job_id, caller=caller)
        chosen = jobs.attempt_number(session, job=job, number=attempt)
        if chosen is None:
            if attempt is not None:
                raise not_found("attempt", str(attempt))
            return encoded(StepTimes(attempt=None, points=[]))
        attempt_id, number = chosen
        points = step_times(session, attempt_id=attempt_id, max_points=max_points)
        return encoded(StepTimes(attempt=number, points=points))

    return await reads(read)
