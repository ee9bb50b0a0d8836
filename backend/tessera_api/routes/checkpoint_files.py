"""Checkpoint files: uploaded by the worker of the rank that wrote them (when its host shares
them), downloaded by that rank's party."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio
from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import FileResponse

from tessera_api.deps import Principal, SessionDep, SettingsDep, TaskReporter
from tessera_api.errors import not_found, problem_responses
from tessera_api.routes.paging import Key
from tessera_api.schemas import AS_NAME, MAX_INT, NameCheck
from tessera_api.services import checkpoint_files, jobs
from tessera_api.services.tasks import task_of_job

router = APIRouter(prefix="/jobs/{job_id}/checkpoints", tags=["telemetry"])

AttemptNumber = Annotated[int, Path(ge=1, le=1_000_000)]
StepNumber = Annotated[int, Path(ge=0, le=MAX_INT)]
RankNumber = Annotated[int, Path(ge=0, le=65535)]
FILE_PATH = "/{attempt}/{step}/{rank}/file"
KindQuery = Annotated[
    Literal["checkpoint", "export", "model"], Query(description="What the rank saved")
]
BINARY = {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}


@router.put(
    FILE_PATH,
    status_code=204,
    responses=problem_responses(403, 404, 413, 422),
    openapi_extra={"requestBody": {"required": True, "content": BINARY}},
)
async def upload_checkpoint_file(
    job_id: Key,
    attempt: AttemptNumber,
    step: StepNumber,
    rank: RankNumber,
    task_id: Annotated[str, Query(max_length=64, json_schema_extra=AS_NAME), NameCheck],
    caller: TaskReporter,
    session: SessionDep,
    settings: SettingsDep,
    request: Request,
    kind: KindQuery = "checkpoint",
) -> Response:
    """Store the file of a checkpoint the task recorded; its size and SHA-256 must match."""

    def find() -> checkpoint_files.Stored:
        task = task_of_job(session, job_id=job_id, task_id=task_id, caller=caller)
        if task.attempt.number != attempt:
            raise not_found("attempt", str(attempt))
        return checkpoint_files.for_upload(
            session, settings.resolved_artifacts_dir, task=task, kind=kind, step=step, rank=rank
        )

    stored = await anyio.to_thread.run_sync(find)
    upload = await anyio.to_thread.run_sync(
        lambda: checkpoint_files.Upload(stored, max_bytes=settings.max_checkpoint_file_bytes)
    )
    try:
        async for chunk in request.stream():
            await anyio.to_thread.run_sync(upload.write, chunk)
    except BaseException:
        upload.abort()
        raise
    await anyio.to_thread.run_sync(upload.commit)
    return Response(status_code=204)


@router.get(
    FILE_PATH,
    response_class=FileResponse,
    responses={
        200: {"content": BINARY, "description": "The checkpoint's file"},
        **problem_responses(403, 404),
    },
)
def download_checkpoint_file(
    job_id: Key,
    attempt: AttemptNumber,
    step: StepNumber,
    rank: RankNumber,
    caller: Principal,
    session: SessionDep,
    settings: SettingsDep,
    kind: KindQuery = "checkpoint",
) -> FileResponse:
    """A checkpoint's file, for the party whose rank wrote it (and the admin)."""
    jobs.get_job(session, job_id=job_id, caller=caller)
    stored = checkpoint_files.for_download(
        session,
        settings.resolved_artifacts_dir,
        job_id=job_id,
        attempt=attempt,
        kind=kind,
        step=step,
        rank=rank,
        caller=caller,
    )
    return FileResponse(
        stored.path,
        media_type="application/octet-stream",
        filename=f"{job_id[:8]}-attempt{attempt}-{kind}-step{step}-rank{rank}.pt",
        headers={"X-Checkpoint-SHA256": stored.sha256},
    )
