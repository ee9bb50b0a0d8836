"""Parties: the organisations that take part in jobs."""

from __future__ import annotations

from fastapi import APIRouter

from tessera_api.deps import Admin, Principal, SessionDep, SpecsDep
from tessera_api.errors import problem_responses
from tessera_api.routes.paging import Key, Limit, Offset
from tessera_api.schemas import (
    Page,
    PartyCreate,
    PartyCreated,
    PartyPolicy,
    PartyPublic,
    PartyUpdate,
)
from tessera_api.services import parties, policy
from tessera_api.views import party_public

router = APIRouter(prefix="/parties", tags=["parties"])


@router.post("", status_code=201, responses=problem_responses(409))
def create_party(party_in: PartyCreate, _: Admin, session: SessionDep) -> PartyCreated:
    """Create a party; the reply carries its API token, shown only this once."""
    party, token = parties.create_party(session, party_in=party_in)
    session.commit()
    return PartyCreated(**party_public(party).model_dump(), token=token)


@router.get("")
def list_parties(
    caller: Principal, session: SessionDep, limit: Limit = 50, offset: Offset = 0
) -> Page[PartyPublic]:
    """List parties (a party token sees only its own)."""
    rows, total = parties.list_parties(session, caller=caller, limit=limit, offset=offset)
    return Page[PartyPublic](data=[party_public(p) for p in rows], count=total)


@router.get("/{name}", responses=problem_responses(403, 404))
def get_party(name: Key, caller: Principal, session: SessionDep) -> PartyPublic:
    """Get one party."""
    return party_public(parties.get_party(session, name=name, caller=caller))


@router.patch("/{name}", responses=problem_responses(404))
def update_party(
    name: Key, party_in: PartyUpdate, caller: Admin, session: SessionDep
) -> PartyPublic:
    """Change a party's display name, description or disabled flag."""
    party = parties.get_party(session, name=name, caller=caller)
    parties.update_party(session, party=party, party_in=party_in)
    session.commit()
    return party_public(party)


@router.post("/{name}/disable", responses=problem_responses(404))
def disable_party(name: Key, caller: Admin, session: SessionDep) -> PartyPublic:
    """Disable a party: its tokens stop working and it leaves its unfinished jobs."""
    party = parties.get_party(session, name=name, caller=caller)
    parties.update_party(session, party=party, party_in=PartyUpdate(disabled=True))
    session.commit()
    return party_public(party)


@router.get("/{name}/policy", responses=problem_responses(403, 404))
def get_policy(name: Key, caller: Principal, session: SessionDep) -> PartyPolicy:
    """Get a party's policy: whose jobs it approves unasked, what its workers may run."""
    return policy.policy_of(parties.get_party(session, name=name, caller=caller))


@router.put("/{name}/policy", responses=problem_responses(403, 404, 422))
def put_policy(
    name: Key, policy_in: PartyPolicy, caller: Principal, session: SessionDep, specs: SpecsDep
) -> PartyPolicy:
    """Replace a party's policy (that party's token or the admin)."""
    party = parties.get_party(session, name=name, caller=caller)
    policy.set_policy(session, party=party, policy=policy_in, specs=specs)
    session.commit()
    return policy.policy_of(party)
