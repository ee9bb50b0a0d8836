"""Bearer tokens: the admin token from settings and per-party tokens stored hashed."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from tessera_api.models import Party

PARTY_TOKEN_PREFIX = "tsp_"
TASK_TOKEN_PREFIX = "tst_"


def new_party_token() -> str:
    return PARTY_TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_task_token() -> str:
    """A task's own credential: its ranks report with it, and it dies with the task."""
    return TASK_TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def same_secret(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True)
class Caller:
    """Who is calling: the admin, one party, or one task of a party (its ranks' credential)."""

    party: Party | None
    task_id: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.party is None

    @property
    def name(self) -> str:
        return "admin" if self.party is None else f"party:{self.party.name}"

    def is_party(self, party_id: str) -> bool:
        return self.party is not None and self.party.id == party_id
