"""Metric series queries with server-side downsampling.

A series is one (name, rank). When a series has more points than asked for in the step range,
its steps are cut into ``max_points`` equal buckets and each bucket becomes one point (mean, min,
max, count, last step): a single grouped scan over the (attempt, name, step) index.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import BigInteger, ColumnElement, cast, func, literal, select
from sqlalchemy.orm import Session

from tessera_api.models import MetricPoint
from tessera_api.schemas import Series, SeriesPoint


def query_series(
    session: Session,
    *,
    attempt_id: str,
    names: Sequence[str],
    rank: int | None,
    step_min: int | None,
    step_max: int | None,
    max_points: int,
) -> list[Series]:
    base = [MetricPoint.attempt_id == attempt_id]
    if names:
        base.append(MetricPoint.name.in_(names))
    if rank is not None:
        base.append(MetricPoint.rank == rank)
    if step_min is not None:
        base.append(MetricPoint.step >= step_min)
    if step_max is not None:
        base.append(MetricPoint.step <= step_max)
    stats = session.execute(
        select(
            MetricPoint.name,
            MetricPoint.rank,
            func.count(),
            func.min(MetricPoint.step),
            func.max(MetricPoint.step),
        )
        .where(*base)
        .group_by(MetricPoint.name, MetricPoint.rank)
        .order_by(MetricPoint.name, MetricPoint.rank)
    ).all()
    result: list[Series] = []
    for name, series_rank, count, lo, hi in stats:
        where = [*base, MetricPoint.name == name, MetricPoint.rank == series_rank]
        if count <= max_points:
            points = _raw(session, where)
        else:
            points = _buckets(session, where, lo=lo, hi=hi, max_points=max_points)
        result.append(
            Series(name=name, rank=series_rank, downsampled=count > max_points, points=points)
        )
    return result


def _raw(session: Session, where: list[ColumnElement[bool]]) -> list[SeriesPoint]:
    rows = session.execute(
        select(MetricPoint.step, MetricPoint.value)
        .where(*where)
        .order_by(MetricPoint.step, MetricPoint.id)
    ).all()
    return [SeriesPoint(step=s, value=v, min=v, max=v, count=1) for s, v in rows]


def _buckets(
    session: Session, where: list[ColumnElement[bool]], *, lo: int, hi: int, max_points: int
) -> list[SeriesPoint]:
    span = hi - lo + 1
    bucket = cast(MetricPoint.step - literal(lo), BigInteger) * max_points // literal(span)
    query = (
        select(
            func.max(MetricPoint.step),
            func.avg(MetricPoint.value),
            func.min(MetricPoint.value),
            func.max(MetricPoint.value),
            func.count(),
        )
        .where(*where)
        .group_by(bucket)
        .order_by(func.max(MetricPoint.step))
    )
    return [
        SeriesPoint(step=s, value=float(avg), min=mn, max=mx, count=n)
        for s, avg, mn, mx, n in session.execute(query).all()
    ]
