"""Which of a job's metrics and logs a caller may read.

Each role of an algorithm says which metric names its parties may read from other parties'
ranks (``RoleSpec.sees_metrics``); a party always reads what its own ranks report, and the
admin reads everything. A party whose roles see only some metrics of others does not read
other parties' logs either: their progress lines carry the results it may not learn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tessera_api.models import Job, RoleAssignment, Task
from tessera_api.security import Caller
from tessera_ml.spec import AlgorithmSpec, sees_metric


@dataclass(frozen=True)
class MetricView:
    """What a party with limited sight reads of one attempt."""

    party: str
    party_id: str
    patterns: tuple[str, ...]
    own_ranks: frozenset[int]

    def sees(self, name: str, rank: int) -> bool:
        return rank in self.own_ranks or sees_metric(self.patterns, name)

    def event(self, data: Mapping[str, Any]) -> dict[str, Any] | None:
        """A ``metrics`` event cut to what the party sees (None: nothing of it)."""
        if data.get("party") == self.party:
            return dict(data)
        last = {k: v for k, v in data.get("last", {}).items() if sees_metric(self.patterns, k)}
        if not last:
            return None
        return {**data, "names": sorted(last), "last": last}


def patterns(
    session: Session, *, job: Job, caller: Caller, specs: Mapping[str, AlgorithmSpec]
) -> tuple[str, ...] | None:
    """The metric names the caller reads from other parties' ranks; None: every name."""
    if caller.party is None:
        return None
    spec = specs.get(job.algorithm)
    if spec is None:
        return None
    held = set(
        session.scalars(
            select(RoleAssignment.role).where(
                RoleAssignment.job_id == job.id, RoleAssignment.party_id == caller.party.id
            )
        )
    )
    seen: list[str] = []
    for role in spec.roles:
        if role.name not in held:
            continue
        if role.sees_all_metrics:
            return None
        seen += [p for p in role.sees_metrics if p not in seen]
    return tuple(seen)


def metric_view(
    session: Session,
    *,
    job: Job,
    attempt_id: str | None,
    caller: Caller,
    specs: Mapping[str, AlgorithmSpec],
) -> MetricView | None:
    """The caller's view of an attempt's metrics; None when it sees them all."""
    seen = patterns(session, job=job, caller=caller, specs=specs)
    if seen is None or caller.party is None:
        return None
    own: set[int] = set()
    if attempt_id is not None:
        for ranks in session.scalars(
            select(Task.ranks).where(
                Task.attempt_id == attempt_id, Task.party_id == caller.party.id
            )
        ):
            own.update(int(r["rank"]) for r in ranks)
    return MetricView(caller.party.name, caller.party.id, seen, frozenset(own))
