"""Metric series queries with server-side downsampling.

A series is one (name, rank); its extent comes from ``metric_series``, kept by ingest. When a
series has more points than asked for, the asked step range is cut into at most ``max_points``
equal buckets and each bucket becomes one point (mean, min, max, count, last step): one grouped
scan of the covering (attempt, name, rank, step, value) index.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import BigInteger, ColumnElement, cast, func, literal, select
from sqlalchemy.orm import Session

from tessera_api.models import MetricPoint, MetricSeries
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
    chosen = select(MetricSeries).where(MetricSeries.attempt_id == attempt_id)
    if names:
        chosen = chosen.where(MetricSeries.name.in_(names))
    if rank is not None:
        chosen = chosen.where(MetricSeries.rank == rank)
    result: list[Series] = []
    for s in session.scalars(chosen.order_by(MetricSeries.name, MetricSeries.rank)):
        lo = s.min_step if step_min is None else max(step_min, s.min_step)
        hi = s.max_step if step_max is None else min(step_max, s.max_step)
        where = [
            MetricPoint.attempt_id == attempt_id,
            MetricPoint.name == s.name,
            MetricPoint.rank == s.rank,
            MetricPoint.step >= lo,
            MetricPoint.step <= hi,
        ]
        small = s.count <= max_points
        if hi < lo:
            points: list[SeriesPoint] = []
        elif small:
            points = _raw(session, where)
        else:
            points = _buckets(session, where, lo=lo, hi=hi, max_points=max_points)
        result.append(Series(name=s.name, rank=s.rank, downsampled=not small, points=points))
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
    width = -(-(hi - lo + 1) // max_points)  # steps per bucket, rounded up: <= max_points buckets
    bucket = cast(MetricPoint.step - literal(lo), BigInteger) // literal(width, BigInteger)
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
