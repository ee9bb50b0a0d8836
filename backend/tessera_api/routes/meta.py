"""Health, version and who the caller is."""

from __future__ import annotations

from fastapi import APIRouter

from tessera_api import __version__
from tessera_api.deps import Principal, SpecsDep
from tessera_api.schemas import Health, Me, Version

router = APIRouter(tags=["meta"])

API_VERSION = "v1"


@router.get("/health")
def health() -> Health:
    """Say the service is up (no token needed)."""
    return Health(status="ok")


@router.get("/version")
def version(_: Principal, specs: SpecsDep) -> Version:
    """The service version, API version and available algorithms."""
    return Version(version=__version__, api=API_VERSION, algorithms=sorted(specs))


@router.get("/me")
def me(caller: Principal) -> Me:
    """Who the token belongs to: the admin, or one party."""
    return Me(name="admin" if caller.party is None else caller.party.name, is_admin=caller.is_admin)
