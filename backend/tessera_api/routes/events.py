"""A job's live events as Server-Sent Events, resumable with ``Last-Event-ID``."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from tessera_api.deps import ReadsDep, SpecsDep
from tessera_api.errors import problem_responses
from tessera_api.event_hub import EventHub
from tessera_api.models import Event, Job
from tessera_api.routes.paging import MAX_ROW_ID, Key
from tessera_api.security import Caller
from tessera_api.services import jobs, visibility
from tessera_api.services.visibility import MetricView
from tessera_api.states import JOB_TERMINAL, JobStatus

router = APIRouter(prefix="/jobs", tags=["events"])

KEEPALIVE_S = 15.0
BATCH = 500
RETRY = "retry: 2000\n\n"
"""How long a client waits before it reconnects, sent first."""
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.get(
    "/{job_id}/events",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "An SSE stream"},
        **problem_responses(403, 404),
    },
)
async def stream_events(
    job_id: Key,
    reads: ReadsDep,
    specs: SpecsDep,
    request: Request,
    last_event_id: Annotated[int | None, Header(alias="Last-Event-ID", ge=0, le=MAX_ROW_ID)] = None,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_ROW_ID, description="Same as Last-Event-ID")
    ] = None,
    once: Annotated[bool, Query(description="Send what is stored now, then end")] = False,
    timeout_s: Annotated[float | None, Query(gt=0, le=3600, description="End after")] = None,
) -> Response:
    """Stream a job's status changes and metric summaries; ends when the job has finished."""
    # of other parties' ranks, only the metrics the caller's roles may see (services.visibility)
    cursor = last_event_id if last_event_id is not None else (after or 0)

    def read(session: Session, caller: Caller) -> tuple[MetricView | None, str | None]:
        job, roles = jobs.get_job_and_roles(session, job_id=job_id, caller=caller)
        view = visibility.metric_view(
            session, job=job, attempt_id=None, caller=caller, specs=specs, roles=roles
        )
        if not once:
            return view, None
        # all of it is at hand: read in the same trip, sent in one answer
        events = _stored(session, job_id, cursor)
        return view, RETRY + "".join(_format(event, view) for event in events)

    view, stored = await reads(read)
    if stored is not None:
        return Response(stored, media_type="text/event-stream", headers=HEADERS)
    # the stream holds no session between its reads: each read takes one of its own
    factory: sessionmaker[Session] = request.app.state.session_factory
    body = _events(
        factory, request, job_id=job_id, cursor=cursor, once=once, timeout_s=timeout_s, view=view
    )
    return StreamingResponse(body, media_type="text/event-stream", headers=HEADERS)


def _stored(session: Session, job_id: str, cursor: int) -> list[Event]:
    """Every event of the job after ``cursor``."""
    events: list[Event] = []
    while True:
        batch = _after(session, job_id, cursor)
        events += batch
        if len(batch) < BATCH:
            return events
        cursor = batch[-1].id


def _after(session: Session, job_id: str, cursor: int) -> list[Event]:
    """At most ``BATCH`` events of the job after ``cursor``."""
    return list(
        session.scalars(
            select(Event)
            .where(Event.job_id == job_id, Event.id > cursor)
            .order_by(Event.id)
            .limit(BATCH)
        )
    )


def _fetch(factory: sessionmaker[Session], job_id: str, cursor: int) -> tuple[list[Event], bool]:
    """Events after ``cursor`` and whether the job has finished (or is gone)."""
    with factory() as session:
        status = session.scalar(select(Job.status).where(Job.id == job_id))
        events = _after(session, job_id, cursor)
        finished = status is None or JobStatus(status) in JOB_TERMINAL
        return events, finished


def _format(event: Event, view: MetricView | None) -> str:
    shown: dict[str, Any] = event.data
    if view is not None and event.kind == "metrics":
        cut = view.event(event.data)
        if cut is None:
            return ""
        shown = cut
    data = json.dumps({**shown, "time": event.created_at.isoformat()})
    return f"id: {event.id}\nevent: {event.kind}\ndata: {data}\n\n"


async def _events(
    factory: sessionmaker[Session],
    request: Request,
    *,
    job_id: str,
    cursor: int,
    once: bool,
    timeout_s: float | None,
    view: MetricView | None,
) -> AsyncIterator[str]:
    hub: EventHub = request.app.state.event_hub
    yield RETRY
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        ticket = hub.ticket(job_id)  # before reading: a commit from now on wakes it
        events, finished = await anyio.to_thread.run_sync(_fetch, factory, job_id, cursor)
        if events:
            yield "".join(_format(event, view) for event in events)  # one write, not one per event
            cursor = events[-1].id
        if len(events) == BATCH:
            continue
        if once or (finished and not events) or hub.stopping:
            return
        if finished:
            continue  # what came with the end was sent: read once more, then stop
        if await request.is_disconnected():
            return
        wait_s = KEEPALIVE_S
        if deadline is not None:
            wait_s = min(wait_s, deadline - time.monotonic())
            if wait_s <= 0:
                return
        if not await hub.wait(ticket, wait_s) and (deadline is None or time.monotonic() < deadline):
            yield ": keep-alive\n\n"
