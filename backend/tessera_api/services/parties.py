"""Parties: create with a one-time token, read, update, disable."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tessera_api.errors import conflict, forbidden, invalid, not_found
from tessera_api.models import Party
from tessera_api.schemas import PartyCreate, PartyUpdate
from tessera_api.security import Caller, hash_token, new_party_token
from tessera_api.services.lifecycle import cut_off_party
from tessera_api.services.policy import ADMIN


def create_party(session: Session, *, party_in: PartyCreate) -> tuple[Party, str]:
    """The new party and its token, which is stored only as a hash."""
    if party_in.name == ADMIN:
        raise invalid("reserved_name", f"{ADMIN!r} names the admin in policies", ("body", "name"))
    if session.scalars(select(Party).where(Party.name == party_in.name)).first() is not None:
        raise conflict("party_exists", f"party {party_in.name!r} already exists")
    token = new_party_token()
    party = Party(
        name=party_in.name,
        display_name=party_in.display_name or party_in.name,
        description=party_in.description,
        token_hash=hash_token(token),
        disabled=False,
    )
    session.add(party)
    session.flush()
    return party, token


def get_party(session: Session, *, name: str, caller: Caller) -> Party:
    party = session.scalars(select(Party).where(Party.name == name)).first()
    if party is None:
        raise not_found("party", name)
    if not caller.is_admin and not caller.is_party(party.id):
        raise forbidden(f"{caller.name} may not see party {name!r}")
    return party


def list_parties(
    session: Session, *, caller: Caller, limit: int, offset: int
) -> tuple[list[Party], int]:
    query = select(Party)
    if caller.party is not None:
        query = query.where(Party.id == caller.party.id)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(Party.name).limit(limit).offset(offset)).all()
    return list(rows), total


def directory(session: Session, *, limit: int, offset: int) -> tuple[list[Party], int]:
    """The enabled parties, by name, whoever asks."""
    query = select(Party).where(Party.disabled.is_(False))
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(Party.name).limit(limit).offset(offset)).all()
    return list(rows), total


def update_party(session: Session, *, party: Party, party_in: PartyUpdate) -> Party:
    if party_in.display_name is not None:
        party.display_name = party_in.display_name
    if party_in.description is not None:
        party.description = party_in.description
    if party_in.disabled is not None:
        newly = party_in.disabled and not party.disabled
        party.disabled = party_in.disabled
        if newly:
            cut_off_party(session, party=party)
    session.flush()
    return party


def parties_by_name(session: Session, *, names: set[str]) -> dict[str, Party]:
    rows = session.scalars(select(Party).where(Party.name.in_(names))).all()
    return {p.name: p for p in rows}
