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
    held = session.scalars(
        select(RoleAssignment.role).where(
            RoleAssignment.job_id == job.id, RoleAssignment.party_id == caller.party.id
        )
    )
    return _sight(specs.get(job.algorithm), set(held))


def _sight(spec: AlgorithmSpec | None, held: set[str]) -> tuple[str, ...] | None:
    """What roles ``held`` of ``spec`` read of other parties' ranks; None: every name."""
    if spec is None:
        return None
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
    roles: frozenset[str] | None = None,
) -> MetricView | None:
    """The caller's view of an attempt's metrics; None when it sees them all. ``roles``: the
    caller's roles in the job where already read (``jobs.get_job_and_roles``)."""
    views = metric_views(
        session,
        jobs={job.id: (job.algorithm, attempt_id)},
        caller=caller,
        specs=specs,
        roles=None if roles is None else {job.id: roles},
    )
    return views.get(job.id)


def metric_views(
    session: Session,
    *,
    jobs: Mapping[str, tuple[str, str | None]],
    caller: Caller,
    specs: Mapping[str, AlgorithmSpec],
    roles: Mapping[str, frozenset[str]] | None = None,
) -> dict[str, MetricView]:
    """The caller's view of each job's attempt (``jobs``: id → algorithm and attempt id) where
    it does not see every metric, in two queries whatever the number of jobs (one fewer when
    the caller's ``roles`` in each job are known)."""
    party = caller.party
    if party is None or not jobs:
        return {}
    held: dict[str, set[str]] = {job_id: set() for job_id in jobs}
    if roles is not None and roles.keys() >= jobs.keys():
        for job_id in jobs:
            held[job_id].update(roles[job_id])
    else:
        for job_id, role in session.execute(
            select(RoleAssignment.job_id, RoleAssignment.role).where(
                RoleAssignment.job_id.in_(jobs), RoleAssignment.party_id == party.id
            )
        ):
            held[job_id].add(role)
    sights = {j: _sight(specs.get(algorithm), held[j]) for j, (algorithm, _) in jobs.items()}
    limited = {j: seen for j, seen in sights.items() if seen is not None}
    attempts = {jobs[j][1]: j for j in limited if jobs[j][1] is not None}
    own: dict[str, set[int]] = {j: set() for j in limited}
    if attempts:
        for attempt_id, ranks in session.execute(
            select(Task.attempt_id, Task.ranks).where(
                Task.attempt_id.in_(attempts), Task.party_id == party.id
            )
        ):
            own[attempts[attempt_id]].update(int(r["rank"]) for r in ranks)
    return {
        j: MetricView(party.name, party.id, seen, frozenset(own[j])) for j, seen in limited.items()
    }
