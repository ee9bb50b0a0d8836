"""Request dependencies as ``Annotated`` aliases, so route signatures read like sentences."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select
from sqlalchemy.orm import Session

from tessera_api.dispatch import Dispatcher
from tessera_api.errors import ApiError
from tessera_api.models import Party
from tessera_api.security import Caller, hash_token, same_secret
from tessera_api.settings import Settings
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


def get_dispatcher(request: Request) -> Dispatcher:
    dispatcher: Dispatcher = request.app.state.dispatcher
    return dispatcher


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
SpecsDep = Annotated[Mapping[str, AlgorithmSpec], Depends(get_specs)]
DispatcherDep = Annotated[Dispatcher, Depends(get_dispatcher)]


def get_caller(
    session: SessionDep,
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    if credentials is None or not credentials.credentials:
        raise ApiError(401, "unauthenticated", "a bearer token is required")
    token = credentials.credentials
    if same_secret(token, settings.admin_token):
        return Caller(party=None)
    digest = hash_token(token)
    party = session.scalars(select(Party).where(Party.token_hash == digest)).one_or_none()
    if party is None or not same_secret(digest, party.token_hash):
        raise ApiError(401, "invalid_token", "the bearer token is not valid")
    if party.disabled:
        raise ApiError(403, "party_disabled", f"party {party.name!r} is disabled")
    return Caller(party=party)


Principal = Annotated[Caller, Depends(get_caller)]


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
