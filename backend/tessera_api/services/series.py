"""Metric series queries with server-side downsampling.

A series is one (name, rank); its extent comes from ``metric_series``, kept by ingest. When a
series has more points than asked for, the asked step range is cut into at most ``max_points``
equal buckets and each bucket becomes one point (mean, min, max, count, last step): one grouped
scan of the covering (attempt, name, rank, step, value) index.

A dashboard query returns thousands of points, so the work per point is kept small: each series
is read by one statement built once (with parameters, so it is compiled once), rows become
plain dicts in the shape of ``schemas.SeriesPoint``, and the answer is encoded once
(``encode``) instead of through one validated model per point, which took most of the time.

A series' stored points change only by ingest, which adds to its ``count`` in the same
transaction, so (attempt, name, rank, count, step extent, asked range, max_points) names one
answer for good: each process keeps the encoded JSON of recent series under that key
(``SeriesCache``), and a dashboard polling a job reads from the database only the series that
grew since.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
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


class SeriesCache:
    """The encoded JSON of recently answered series, least recently used dropped first once
    their bytes pass ``max_bytes``. Shared by the request threads of one process."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._held: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            found = self._held.get(key)
            if found is None:
                self.misses += 1
                return None
            self._held.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: Hashable, encoded: bytes) -> None:
        if len(encoded) > self.max_bytes:
            return
        with self._lock:
            old = self._held.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._held[key] = encoded
            self._bytes += len(encoded)
            while self._bytes > self.max_bytes:
                _, dropped = self._held.popitem(last=False)
                self._bytes -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._held.clear()
            self._bytes = 0


CACHE = SeriesCache(max_bytes=64 * 1024 * 1024)
"""This process's series answers: at most 64 MiB, about a thousand 1000-point series."""


def encode_series(series: SeriesRows) -> bytes:
    """The JSON of one ``schemas.Series``."""
    return pydantic_core.to_json(
        {
            "name": series.name,
            "rank": series.rank,
            "downsampled": series.downsampled,
            "points": series.points,
        }
    )


def encode(attempt: int | None, series: Sequence[bytes]) -> bytes:
    """The JSON of ``schemas.MetricsPublic`` from its series' JSON (``encode_series``)."""
    head = b'{"attempt":' + (b"null" if attempt is None else str(attempt).encode())
    return head + b',"series":[' + b",".join(series) + b"]}"


def query_series(
    session: Session,
    *,
    attempt_id: str,
    names: Sequence[str],
    rank: int | None,
    step_min: int | None,
    step_max: int | None,
    max_points: int,
    cache: SeriesCache | None = CACHE,
    visible: Callable[[str, int], bool] | None = None,
) -> list[bytes]:
    """Each series' ``encode_series`` JSON, from ``cache`` where it holds the answer; only the
    series ``visible(name, rank)`` allows when it is given."""
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
    result: list[bytes] = []
    for name, series_rank, count, min_step, max_step in session.execute(listing).all():
        if visible is not None and not visible(name, series_rank):
            continue
        lo = min_step if step_min is None else max(step_min, min_step)
        hi = max_step if step_max is None else min(step_max, max_step)
        key = (attempt_id, name, series_rank, count, min_step, max_step, lo, hi, max_points)
        encoded = cache.get(key) if cache is not None else None
        if encoded is None:
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
            encoded = encode_series(SeriesRows(name, series_rank, not small, points))
            if cache is not None:
                cache.put(key, encoded)
        result.append(encoded)
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
