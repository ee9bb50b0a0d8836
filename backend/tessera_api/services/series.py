"""Metric series queries with server-side downsampling.

A series is one (name, rank); its extent comes from ``metric_series``, kept by ingest. When a
series has more points than asked for, the asked step range is cut into at most ``max_points``
equal buckets and each bucket becomes one point (mean, min, max, count, last step): one grouped
scan of the covering (attempt, name, rank, step, value) index.

A dashboard query returns thousands of points, so the work per point is kept small: each series
is read by one statement built once (with parameters, so it is compiled once), rows become
plain dicts in the shape of ``schemas.SeriesPoint``, and the answer is encoded once
(``encode``) instead of through one validated model per point, which took most of the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import pydantic_core
from sqlalchemy import BigInteger, bindparam, cast, func, select
from sqlalchemy.orm import Session

from tessera_api.models import MetricPoint, MetricSeries

_POINTS = MetricPoint.metadata.tables[MetricPoint.__tablename__]
_SERIES = MetricSeries.metadata.tables[MetricSeries.__tablename__]
_LO = bindparam("lo", type_=BigInteger)
_IN_SERIES = (
    _POINTS.c.attempt_id == bindparam("attempt_id"),
    _POINTS.c.name == bindparam("name"),
    _POINTS.c.rank == bindparam("rank"),
    _POINTS.c.step >= _LO,
    _POINTS.c.step <= bindparam("hi", type_=BigInteger),
)
_RAW = (
    select(_POINTS.c.step, _POINTS.c.value)
    .where(*_IN_SERIES)
    .order_by(_POINTS.c.step, _POINTS.c.id)
)
_BUCKETS = (
    select(
        func.max(_POINTS.c.step),
        func.avg(_POINTS.c.value),
        func.min(_POINTS.c.value),
        func.max(_POINTS.c.value),
        func.count(),
    )
    .where(*_IN_SERIES)
    .group_by(cast(_POINTS.c.step - _LO, BigInteger) // bindparam("width", type_=BigInteger))
    .order_by(func.max(_POINTS.c.step))
)


class PointJson(TypedDict):
    """One point as ``schemas.SeriesPoint`` serializes it."""

    step: int
    value: float
    min: float
    max: float
    count: int


@dataclass(frozen=True)
class SeriesRows:
    """One series as ``schemas.Series``, its points already in their JSON shape."""

    name: str
    rank: int
    downsampled: bool
    points: list[PointJson]


def encode(attempt: int | None, series: Sequence[SeriesRows]) -> bytes:
    """The JSON of ``schemas.MetricsPublic`` for these series."""
    return pydantic_core.to_json(
        {
            "attempt": attempt,
            "series": [
                {"name": s.name, "rank": s.rank, "downsampled": s.downsampled, "points": s.points}
                for s in series
            ],
        }
    )


def query_series(
    session: Session,
    *,
    attempt_id: str,
    names: Sequence[str],
    rank: int | None,
    step_min: int | None,
    step_max: int | None,
    max_points: int,
) -> list[SeriesRows]:
    listing = (
        select(
            _SERIES.c.name, _SERIES.c.rank, _SERIES.c.count, _SERIES.c.min_step, _SERIES.c.max_step
        )
        .where(_SERIES.c.attempt_id == attempt_id)
        .order_by(_SERIES.c.name, _SERIES.c.rank)
    )
    if names:
        listing = listing.where(_SERIES.c.name.in_(names))
    if rank is not None:
        listing = listing.where(_SERIES.c.rank == rank)
    result: list[SeriesRows] = []
    for name, series_rank, count, min_step, max_step in session.execute(listing).all():
        lo = min_step if step_min is None else max(step_min, min_step)
        hi = max_step if step_max is None else min(step_max, max_step)
        small = count <= max_points
        points: list[PointJson] = []
        if lo <= hi:
            where = {
                "attempt_id": attempt_id,
                "name": name,
                "rank": series_rank,
                "lo": lo,
                "hi": hi,
            }
            if small:
                points = _raw(session, where)
            else:
                width = -(-(hi - lo + 1) // max_points)  # rounded up: <= max_points buckets
                points = _buckets(session, where | {"width": width})
        result.append(SeriesRows(name, series_rank, downsampled=not small, points=points))
    return result


def _raw(session: Session, where: dict[str, object]) -> list[PointJson]:
    points: list[PointJson] = []
    for step, value in session.execute(_RAW, where):
        v = float(value)
        points.append({"step": step, "value": v, "min": v, "max": v, "count": 1})
    return points


def _buckets(session: Session, where: dict[str, object]) -> list[PointJson]:
    return [
        {"step": int(s), "value": float(avg), "min": float(mn), "max": float(mx), "count": int(n)}
        for s, avg, mn, mx, n in session.execute(_BUCKETS, where)
    ]
