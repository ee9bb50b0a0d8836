"""The application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from tessera_api import __version__
from tessera_api.certificates import CertificateService
from tessera_api.db import make_engine, make_read_session_factory, make_session_factory
from tessera_api.deps import Reads, authenticate, get_caller, require_admin, require_party
from tessera_api.dispatch import Dispatcher, QueueDispatcher
from tessera_api.errors import (
    DependencyProblems,
    complete_openapi,
    declare_problems,
    install_error_handlers,
)
from tessera_api.event_hub import EventHub
from tessera_api.frontend import mount_dashboard
from tessera_api.limits import BodySizeLimit
from tessera_api.routes import (
    algorithms,
    checkpoint_files,
    digests,
    directory,
    events,
    jobs,
    meta,
    parties,
    step_times,
    tasks,
    telemetry,
    workers,
)
from tessera_api.settings import Settings
from tessera_ml.registry import all_specs
from tessera_ml.spec import AlgorithmSpec

API_PREFIX = "/api/v1"

DEPENDENCY_PROBLEMS: DependencyProblems = {
    authenticate: (401, 403),  # no or a bad token; a disabled party
    get_caller: (403,),  # a task credential outside the reporting routes
    require_admin: (403,),
    require_party: (403,),
    Reads: (401, 403),  # what authenticate and get_caller answer, checked in its own thread
}
"""What the request dependencies answer, declared on every route that uses them."""


def operation_id(route: APIRoute) -> str:
    return f"{route.tags[0]}-{route.name}" if route.tags else route.name


API_MODULES = (
    meta,
    algorithms,
    parties,
    directory,
    workers,
    jobs,
    digests,
    tasks,
    telemetry,
    checkpoint_files,
    step_times,
    events,
)


def include_api(app: FastAPI) -> None:
    # each module's router straight onto the app, under the API's prefix: a router between
    # them made every request walk two levels of included routers to find its route
    for module in API_MODULES:
        declare_problems(module.router, DEPENDENCY_PROBLEMS)
        app.include_router(module.router, prefix=API_PREFIX)


def run_during_lifespan(app: FastAPI, start: Callable[[], None], stop: Callable[[], None]) -> None:
    """Call ``start`` when ``app`` starts serving and ``stop`` when it stops, around what its
    lifespan already does."""
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[Any]:
        start()
        try:
            async with inner(application) as state:
                yield state
        finally:
            stop()

    app.router.lifespan_context = lifespan


def create_app(
    settings: Settings | None = None,
    dispatcher: Dispatcher | None = None,
    specs: Mapping[str, AlgorithmSpec] | None = None,
) -> FastAPI:
    """The control plane; ``specs`` defaults to every algorithm in ``tessera_ml``."""
    settings = settings or Settings()
    app = FastAPI(
        title="Tessera control plane",
        version=__version__,
        description="Parties, workers, jobs, attempts, metrics and logs of Tessera.",
        generate_unique_id_function=operation_id,
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=f"{API_PREFIX}/docs",
        redoc_url=None,
    )
    engine = make_engine(settings.resolved_database_url)
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = make_session_factory(engine)
    app.state.read_session_factory = make_read_session_factory(engine)
    app.state.event_hub = hub = EventHub(settings.resolved_database_url)
    hub.watch(app.state.session_factory)
    run_during_lifespan(app, hub.start, hub.close)
    app.state.dispatcher = dispatcher or QueueDispatcher()
    app.state.specs = dict(specs) if specs is not None else all_specs()
    app.state.certificates = CertificateService(settings.resolved_ca_dir)
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit)
    include_api(app)
    complete_openapi(app)
    mount_dashboard(app, settings.frontend_dist)
    return app
