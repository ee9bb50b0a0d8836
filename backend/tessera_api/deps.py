"""Request dependencies as ``Annotated`` aliases, so route signatures read like sentences."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select
from sqlalchemy.orm import Session

from tessera_api.certificates import CertificateService
from tessera_api.dispatch import Dispatcher
from tessera_api.errors import ApiError
from tessera_api.models import Party, Task
from tessera_api.security import TASK_TOKEN_PREFIX, Caller, hash_token, same_secret
from tessera_api.settings import Settings
from tessera_api.states import TASK_TERMINAL, TaskStatus
from tessera_ml.spec import AlgorithmSpec

_bearer = HTTPBearer(auto_error=False, description="The admin token or a party token")


def get_session(request: Request) -> Iterator[Session]:
    with request.app.state.session_factory() as session:
        yield session


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_specs(request: Request) -> Mapping[str, AlgorithmSpec]:
    specs: Mapping[str, AlgorithmSpec] = request.app.state.specs
    return specs


def get_certificates(request: Request) -> CertificateService:
    certificates: CertificateService = request.app.state.certificates
    return certificates


def get_dispatcher(request: Request) -> Dispatcher:
    dispatcher: Dispatcher = request.app.state.dispatcher
    return dispatcher


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
SpecsDep = Annotated[Mapping[str, AlgorithmSpec], Depends(get_specs)]
DispatcherDep = Annotated[Dispatcher, Depends(get_dispatcher)]
CertificatesDep = Annotated[CertificateService, Depends(get_certificates)]


def authenticate(
    session: SessionDep,
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """The admin, a party, or a task (whose credential works only while the task is live)."""
    if credentials is None or not credentials.credentials:
        raise ApiError(401, "unauthenticated", "a bearer token is required")
    token = credentials.credentials
    if same_secret(token, settings.admin_token):
        return Caller(party=None)
    digest = hash_token(token)
    if token.startswith(TASK_TOKEN_PREFIX):
        return _task_caller(session, digest)
    party = session.scalars(select(Party).where(Party.token_hash == digest)).one_or_none()
    if party is None or not same_secret(digest, party.token_hash):
        raise ApiError(401, "invalid_token", "the bearer token is not valid")
    _refuse_disabled(party)
    return Caller(party=party)


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
    _refuse_disabled(task.party)
    return Caller(party=task.party, task_id=task.id)


def _refuse_disabled(party: Party) -> None:
    if party.disabled:
        raise ApiError(
            403, "party_disabled", f"party {party.name!r} is disabled; its workers are cut off"
        )


def get_caller(caller: Annotated[Caller, Depends(authenticate)]) -> Caller:
    if caller.task_id is not None:
        raise ApiError(
            403,
            "task_credential",
            "a task credential may only report its own task's metrics, logs and checkpoints",
        )
    return caller


Principal = Annotated[Caller, Depends(get_caller)]
TaskReporter = Annotated[Caller, Depends(authenticate)]
"""A party, the admin, or the credential of the task being reported on."""


def require_admin(caller: Principal) -> Caller:
    if not caller.is_admin:
        raise ApiError(403, "admin_only", "only the admin may do this")
    return caller


def require_party(caller: Principal) -> Caller:
    if caller.party is None:
        raise ApiError(403, "party_only", "only a party token may do this")
    return caller


Admin = Annotated[Caller, Depends(require_admin)]
PartyCaller = Annotated[Caller, Depends(require_party)]
