"""Each party's policy: whose jobs it approves unasked and what its workers may run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from tessera_api.errors import ApiError, FieldError, invalid
from tessera_api.models import Party
from tessera_api.schemas import PartyPolicy
from tessera_ml.spec import AlgorithmConfig, AlgorithmSpec

ADMIN = "admin"
"""The name a policy uses for jobs the admin creates."""


def policy_of(party: Party) -> PartyPolicy:
    return PartyPolicy(
        auto_approve_from=list(party.auto_approve_from or []),
        algorithms=None if party.allowed_algorithms is None else list(party.allowed_algorithms),
        custom_code=party.custom_code,
    )


def set_policy(
    session: Session, *, party: Party, policy: PartyPolicy, specs: Mapping[str, AlgorithmSpec]
) -> Party:
    """Replace a party's policy; every name in it must exist."""
    known = set(session.scalars(select(Party.name)).all()) | {ADMIN}
    for i, name in enumerate(policy.auto_approve_from):
        if name not in known:
            raise invalid(
                "unknown_party", f"no party named {name!r}", ("body", "auto_approve_from", i)
            )
    for i, name in enumerate(policy.algorithms or []):
        if name not in specs:
            raise invalid(
                "unknown_algorithm", f"no algorithm named {name!r}", ("body", "algorithms", i)
            )
    party.auto_approve_from = list(dict.fromkeys(policy.auto_approve_from))
    party.allowed_algorithms = (
        None if policy.algorithms is None else list(dict.fromkeys(policy.algorithms))
    )
    party.custom_code = policy.custom_code
    session.flush()
    return party


def approves_unasked(party: Party, creator: str) -> bool:
    """Whether ``party``'s policy approves jobs created by ``creator`` (a party or ``admin``)."""
    return creator in (party.auto_approve_from or [])


def runs_algorithm(party: Party, algorithm: str) -> bool:
    return party.allowed_algorithms is None or algorithm in party.allowed_algorithms


def refusals(
    parties: Iterable[Party], *, spec: AlgorithmSpec, config: AlgorithmConfig
) -> list[ApiError]:
    """Why the parties' policies forbid this job (empty: they allow it)."""
    found: list[ApiError] = []
    parties = list(parties)
    barred = [p.name for p in parties if not runs_algorithm(p, spec.name)]
    if barred:
        found.append(
            invalid(
                "algorithm_not_allowed",
                f"the policy of {_names(barred)} does not allow algorithm {spec.name!r}",
                ("body", "algorithm"),
            )
        )
    targets = spec.code_targets(config)
    closed = [p.name for p in parties if not p.custom_code]
    if targets and closed:
        named = ", ".join(f"{t!r}" for _, t in targets)
        detail = (
            f"the configuration imports code by name ({named}); the policy of "
            f"{_names(closed)} does not allow custom code"
        )
        errors = [FieldError(loc=["body", *loc], msg=detail) for loc, _ in targets]
        found.append(ApiError(422, "custom_code_not_allowed", detail, errors))
    return found


def check_allowed(
    parties: Iterable[Party], *, spec: AlgorithmSpec, config: AlgorithmConfig
) -> None:
    """422 with the first reason the parties' policies forbid this job."""
    found = refusals(parties, spec=spec, config=config)
    if found:
        raise found[0]


def _names(names: Sequence[str]) -> str:
    word = "party" if len(names) == 1 else "parties"
    return f"{word} {', '.join(names)}"
