"""The names of the enabled parties, for any caller to name them in a job's assignments.

Its own path, not under ``/parties``, so that no party name can collide with it."""

from __future__ import annotations

from fastapi import APIRouter

from tessera_api.deps import Principal, SessionDep
from tessera_api.routes.paging import Limit, Offset
from tessera_api.schemas import Page, PartyName
from tessera_api.services import parties

router = APIRouter(tags=["parties"])


@router.get("/party-directory")
def party_directory(
    _: Principal, session: SessionDep, limit: Limit = 500, offset: Offset = 0
) -> Page[PartyName]:
    """The names of the enabled parties, for any caller to name them in a job's assignments."""
    rows, total = parties.directory(session, limit=limit, offset=offset)
    return Page[PartyName](
        data=[PartyName(name=p.name, display_name=p.display_name) for p in rows], count=total
    )
