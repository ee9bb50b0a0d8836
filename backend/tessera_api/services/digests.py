"""Digests of many jobs in three queries (the visible jobs, their attempts, their metrics; two
more for a party, for what its roles may see of others), and the times of an attempt's steps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tessera_api.models import Attempt, Job, MetricPoint, MetricSeries, RoleAssignment
from tessera_api.schemas.digests import FinalValue, JobDigest, StepTime
from tessera_api.security import Caller
from tessera_api.services import visibility
from tessera_ml.spec import AlgorithmSpec


def job_digests(
    session: Session,
    *,
    ids: Sequence[str],
    caller: Caller,
    specs: Mapping[str, AlgorithmSpec],
) -> list[JobDigest]:
    """The digest of each job in ``ids`` the caller may see, in the order asked; of other
    parties' ranks, only the metrics the caller's roles may see."""
    wanted = list(dict.fromkeys(ids))
    query = select(Job.id, Job.algorithm).where(Job.id.in_(wanted))
    if caller.party is not None:
        held = select(RoleAssignment.job_id).where(RoleAssignment.party_id == caller.party.id)
        query = query.where(Job.id.in_(held))
    algorithms: dict[str, str] = dict(session.execute(query).tuples().all())
    visible = set(algorithms)
    latest: dict[str, tuple[int, str]] = {}
    for job_id, number, attempt_id in session.execute(
        select(Attempt.job_id, Attempt.number, Attempt.id).where(Attempt.job_id.in_(visible))
    ):
        if job_id not in latest or number > latest[job_id][0]:
            latest[job_id] = (number, attempt_id)
    job_of = {attempt_id: job_id for job_id, (_, attempt_id) in latest.items()}
    metrics: dict[str, dict[str, FinalValue]] = {job_id: {} for job_id in visible}
    rows = session.execute(
        select(MetricSeries.attempt_id, MetricSeries.name, MetricSeries.rank)
        .add_columns(MetricSeries.last_value, MetricSeries.max_step)
        .where(MetricSeries.attempt_id.in_(job_of), ~MetricSeries.name.contains("."))
        .order_by(MetricSeries.rank.desc())
    )
    views = visibility.metric_views(
        session,
        jobs={j: (algorithms[j], attempt_id) for j, (_, attempt_id) in latest.items()},
        caller=caller,
        specs=specs,
    )
    for attempt_id, name, rank, value, step in rows:
        view = views.get(job_of[attempt_id])
        if view is not None and not view.sees(name, rank):
            continue
        metrics[job_of[attempt_id]][name] = FinalValue(value=value, step=step, rank=rank)
    return [
        JobDigest(
            id=job_id,
            attempts=latest.get(job_id, (0, ""))[0],
            metrics=dict(sorted(metrics[job_id].items())),
        )
        for job_id in wanted
        if job_id in visible
    ]


def step_times(session: Session, *, attempt_id: str, max_points: int) -> list[StepTime]:
    """When each step was first reported in the attempt, thinned evenly to ``max_points`` (the
    first and the last step kept)."""
    rows = session.execute(
        select(MetricPoint.step, func.min(MetricPoint.time))
        .where(MetricPoint.attempt_id == attempt_id)
        .group_by(MetricPoint.step)
        .order_by(MetricPoint.step)
    ).all()
    if len(rows) > max_points:
        last = len(rows) - 1
        rows = [rows[round(i * last / (max_points - 1))] for i in range(max_points)]
    return [StepTime(step=step, time=time) for step, time in rows]
