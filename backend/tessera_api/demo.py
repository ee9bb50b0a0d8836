"""The demo parties of ``tessera up``, with tokens kept under ``$TESSERA_HOME/tokens``.

A token given in the environment (``TESSERA_TOKEN_ALICE`` for party alice) wins; otherwise the
token file is reused, or a fresh token is issued and written there (mode 600).
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from tessera_api.models import Party
from tessera_api.security import hash_token, new_party_token

DEMO_PARTIES = ("alice", "bob", "carol", "dave")


def token_env(party: str) -> str:
    return "TESSERA_TOKEN_" + party.upper().replace("-", "_")


def token_file(home: Path, party: str) -> Path:
    return home / "tokens" / f"{party}.token"


def _write_secret(path: Path, secret: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")


def ensure_party(
    session: Session, home: Path, name: str, auto_approve_from: list[str] | None = None
) -> str:
    """Create the party if needed and return a token that is valid for it.

    A party created here gets ``auto_approve_from`` as its policy's list (without itself);
    an existing party's policy is its own and left alone."""
    given = os.environ.get(token_env(name))
    path = token_file(home, name)
    stored = path.read_text().strip() if path.exists() else None
    token = given or stored or new_party_token()
    party = session.scalars(select(Party).where(Party.name == name)).first()
    if party is None:
        party = Party(name=name, display_name=name.capitalize(), description="demo party")
        party.disabled = False
        party.auto_approve_from = [p for p in auto_approve_from or [] if p != name]
        session.add(party)
    if party.token_hash != hash_token(token):
        party.token_hash = hash_token(token)
    session.flush()
    if given is None and stored != token:
        _write_secret(path, token)
    return token
