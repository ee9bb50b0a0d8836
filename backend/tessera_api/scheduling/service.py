"""The control plane with the real scheduler plugged into its dispatcher seam."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from sqlalchemy.orm import Session

from tessera_api.app import create_app, run_during_lifespan
from tessera_api.scheduling.broker import CelerySender
from tessera_api.scheduling.lease import Lease
from tessera_api.scheduling.scheduler import Scheduler
from tessera_api.settings import Settings


def create_scheduled_app(settings: Settings) -> FastAPI:
    """``create_app`` with a ``Scheduler`` on ``settings.broker_url``, running with the app."""
    sessions: list[Callable[[], Session]] = []
    scheduler = Scheduler(
        lambda: sessions[0](),
        CelerySender(settings.broker_url, settings.home),
        offline_after_s=settings.worker_offline_after_s,
        start_timeout_s=settings.task_start_timeout_s,
        lost_worker_after_s=settings.lost_worker_after_s,
        blame_window_s=settings.blame_window_s,
        lease=Lease(lambda: sessions[0](), ttl_s=settings.scheduler_lease_s),
    )
    app = create_app(settings, dispatcher=scheduler)
    sessions.append(app.state.session_factory)
    app.state.scheduler = scheduler
    run_during_lifespan(app, scheduler.start, scheduler.close)
    return app
