"""Jobs in a few numbers each, many at once: for the jobs list and comparisons."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import RootModel
from sqlalchemy.orm import Session

from tessera_api.deps import ReadsDep, SpecsDep
from tessera_api.routes.encoded import encoded
from tessera_api.schemas.common import AS_NAME
from tessera_api.schemas.digests import JobDigest
from tessera_api.security import Caller
from tessera_api.services.digests import job_digests

router = APIRouter(prefix="/job-digests", tags=["jobs"])

JobIds = Annotated[
    list[Annotated[str, Query(max_length=64, json_schema_extra=AS_NAME)]],
    Query(min_length=1, max_length=100, description="Ids of the jobs (at most 100)"),
]


@router.get("", response_model=list[JobDigest])
async def list_job_digests(reads: ReadsDep, specs: SpecsDep, ids: JobIds) -> Response:
    """Attempts and final metrics of each visible job asked for (others are left out)."""

    def read(session: Session, caller: Caller) -> Response:
        digests = job_digests(session, ids=ids, caller=caller, specs=specs)
        return encoded(RootModel[list[JobDigest]](digests))

    return await reads(read)
