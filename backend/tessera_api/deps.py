"""Request dependencies as ``Annotated`` aliases, so route signatures read like sentences.

The dependencies that do no I/O are ``async``: FastAPI runs a plain ``def`` dependency in its
thread pool, and a trip there and back per dependency per request added up under load. Only
looking up a party's or a task's token goes to a thread (the admin token needs no lookup).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from datetime import timedelta
from typing import Annotated, TypeVar

import anyio
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from tessera_api.certificates import CertificateService
from tessera_api.db import REQUEST_SESSIONS
from tessera_api.dispatch import Dispatcher
from tessera_api.errors import ApiError
from tessera_api.models import Party, Task, utcnow
from tessera_api.security import TASK_TOKEN_PREFIX, Caller, hash_token, same_secret
from tessera_api.settings import Settings
from tessera_api.states import TASK_TERMINAL, TaskStatus
from tessera_ml.spec import AlgorithmSpec

T = TypeVar("T")

_bearer = HTTPBearer(auto_error=False, description="The admin token or a party token")


class _SessionTurns:
    """Per app: the turns of ``db.REQUEST_SESSIONS`` requests to hold a session, and the
    threads that give sessions back (apart from the route threads, so never short of one)."""

    def __init__(self, engine: Engine) -> None:
        at_once = REQUEST_SESSIONS.get(engine.dialect.name, min(REQUEST_SESSIONS.values()))
        self.turns = anyio.Semaphore(at_once)
        self.closers = anyio.CapacityLimiter(at_once)
        self.local = engine.dialect.name == "sqlite"


def _turns(request: Request) -> _SessionTurns:
    state = request.app.state
    turns: _SessionTurns | None = getattr(state, "session_turns", None)
    if turns is None:
        turns = state.session_turns = _SessionTurns(state.engine)
    return turns


async def get_session(request: Request) -> AsyncIterator[Session]:
    """The request's session, closed as soon as the route's answer is ready (before it is sent,
    before an events stream starts); it connects on first use, in the route's thread."""
    state = request.app.state
    turns = _turns(request)
    async with turns.turns:
        session: Session = state.session_factory()
        try:
            yield session
        finally:
            if session.in_transaction() and not turns.local:
                # it holds a connection: giving it back rolls back, which talks to the server
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(session.close, limiter=turns.closers)
            else:
                session.close()  # nothing to give back, or an SQLite file: no waiting


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_specs(request: Request) -> Mapping[str, AlgorithmSpec]:
    specs: Mapping[str, AlgorithmSpec] = request.app.state.specs
    return specs


async def get_certificates(request: Request) -> CertificateService:
    certificates: CertificateService = request.app.state.certificates
    return certificates


async def get_dispatcher(request: Request) -> Dispatcher:
    dispatcher: Dispatcher = request.app.state.dispatcher
    return dispatcher


SessionDep = Annotated[Session, Depends(get_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings)]
SpecsDep = Annotated[Mapping[str, AlgorithmSpec], Depends(get_specs)]
DispatcherDep = Annotated[Dispatcher, Depends(get_dispatcher)]
CertificatesDep = Annotated[CertificateService, Depends(get_certificates)]


def _bearer_token(credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None or not credentials.credentials:
        raise ApiError(401, "unauthenticated", "a bearer token is required")
    return credentials.credentials


async def authenticate(
    session: SessionDep,
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """The admin, a party, or a task (whose credential works only while the task is live)."""
    token = _bearer_token(credentials)
    if same_secret(token, settings.admin_token):
        return Caller(party=None)
    return await anyio.to_thread.run_sync(_token_caller, session, token)


def _token_caller(session: Session, token: str) -> Caller:
    """The party or task whose token this is, looked up by the token's hash."""
    digest = hash_token(token)
    if token.startswith(TASK_TOKEN_PREFIX):
        return _task_caller(session, digest)
    party = session.scalars(select(Party).where(Party.token_hash == digest)).one_or_none()
    if party is None or not same_secret(digest, party.token_hash):
        raise ApiError(401, "invalid_token", "the bearer token is not valid")
    _refuse_disabled(party)
    return Caller(party=party)


REPORT_GRACE = timedelta(hours=1)
"""How long after its attempt ended a task that has not ended itself may still report: what
its worker delivers late (the ranks' last lines, what it kept through an outage of the control
plane; workers retry for 15 minutes). After that the credential ends with the attempt, whether
or not its worker ever said the task stopped."""


def _task_caller(session: Session, digest: str) -> Caller:
    task = session.scalars(select(Task).where(Task.credential_hash == digest)).one_or_none()
    if task is None or task.credential_hash is None:
        raise ApiError(401, "invalid_token", "the bearer token is not valid")
    if TaskStatus(task.status) in TASK_TERMINAL:
        raise ApiError(
            401,
            "credential_expired",
            f"the credential of task {task.id} ended with the task ({task.status})",
        )
    attempt = task.attempt
    if attempt.finished_at is not None and utcnow() - attempt.finished_at > REPORT_GRACE:
        raise ApiError(
            401,
            "credential_expired",
            f"the credential of task {task.id} ended with attempt {attempt.number} "
            f"({attempt.status})",
        )
    _refuse_disabled(task.party)
    return Caller(party=task.party, task_id=task.id)


def _refuse_disabled(party: Party) -> None:
    if party.disabled:
        raise ApiError(
            403, "party_disabled", f"party {party.name!r} is disabled; its workers are cut off"
        )


async def get_caller(caller: Annotated[Caller, Depends(authenticate)]) -> Caller:
    return _not_a_task(caller)


def _not_a_task(caller: Caller) -> Caller:
    if caller.task_id is not None:
        raise ApiError(
            403,
            "task_credential",
            "a task credential may only report its own task's metrics, logs and checkpoints",
        )
    return caller


class Reads:
    """A read the dashboard makes often, done in one trip to a thread: there the caller is
    looked up (as ``Principal`` would), the work runs, and the session is closed. Through the
    ordinary dependencies a party's read took three trips (its token, the route, giving the
    session back), each a wake-up of a thread under one interpreter lock."""

    def __init__(
        self,
        request: Request,
        settings: SettingsDep,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        self._token = _bearer_token(credentials)
        self._admin = same_secret(self._token, settings.admin_token)
        self._request = request

    async def __call__(self, work: Callable[[Session, Caller], T]) -> T:
        """``work(session, caller)`` in a thread, holding one of the process's session turns."""
        async with _turns(self._request).turns:
            return await anyio.to_thread.run_sync(self._run, work)

    def _run(self, work: Callable[[Session, Caller], T]) -> T:
        factory: sessionmaker[Session] = self._request.app.state.read_session_factory
        with factory() as session:
            caller = Caller(party=None) if self._admin else _token_caller(session, self._token)
            return work(session, _not_a_task(caller))


Principal = Annotated[Caller, Depends(get_caller)]
ReadsDep = Annotated[Reads, Depends()]
TaskReporter = Annotated[Caller, Depends(authenticate)]
"""A party, the admin, or the credential of the task being reported on."""


async def require_admin(caller: Principal) -> Caller:
    if not caller.is_admin:
        raise ApiError(403, "admin_only", "only the admin may do this")
    return caller


async def require_party(caller: Principal) -> Caller:
    if caller.party is None:
        raise ApiError(403, "party_only", "only a party token may do this")
    return caller


Admin = Annotated[Caller, Depends(require_admin)]
PartyCaller = Annotated[Caller, Depends(require_party)]
