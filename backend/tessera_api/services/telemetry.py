"""Metric points, log lines and checkpoints reported by ranks."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from tessera_api.models import (
    Attempt,
    Checkpoint,
    LogLine,
    MetricPoint,
    MetricSeries,
    Party,
    Task,
    utcnow,
)
from tessera_api.schemas import CheckpointIn, LogLineIn, MetricPointIn
from tessera_api.services.history import record_event
from tessera_api.services.tasks import check_hosted, hosted_ranks

_METRIC_POINTS = MetricPoint.metadata.tables[MetricPoint.__tablename__]


def _check_ranks(task: Task, ranks: Sequence[int], field: str) -> None:
    hosted = hosted_ranks(task)  # once, not once per point
    for i, rank in enumerate(ranks):
        if rank not in hosted:
            check_hosted(task, rank, ("body", field, i, "rank"))


def ingest_metrics(
    session: Session, *, job_id: str, task: Task, points: Sequence[MetricPointIn]
) -> None:
    _check_ranks(task, [p.rank for p in points], "points")
    if not points:
        return
    # One batch of a task at a time: two at once (a post retried after a timeout, a flush beside
    # the sender thread) would both create a new series' row, or both add to its count.
    session.execute(
        update(Task)
        .where(Task.id == task.id)
        .values(status=Task.status)
        .execution_options(synchronize_session=False)
    )
    _insert_points(session, attempt_id=task.attempt_id, points=points)
    _update_series(session, attempt_id=task.attempt_id, points=points)
    last: dict[str, float] = {}
    for p in sorted(points, key=lambda p: p.step):
        last[p.name] = p.value
    record_event(
        session,
        job_id=job_id,
        kind="metrics",
        data={
            "attempt": task.attempt.number,
            "party": task.party.name,
            "count": len(points),
            "names": sorted(last),
            "first_step": min(p.step for p in points),
            "last_step": max(p.step for p in points),
            "last": last,
        },
    )
    session.flush()


def _insert_points(session: Session, *, attempt_id: str, points: Sequence[MetricPointIn]) -> None:
    """Insert the points through the driver itself, each distinct time converted once: taking
    every row through SQLAlchemy's parameter processing cost more than the insert. PostgreSQL
    gets them by ``COPY``, which costs this process a fifth of an ``executemany``."""
    now = utcnow()
    connection = session.connection()
    dialect = connection.dialect
    convert = _METRIC_POINTS.c.time.type.bind_processor(dialect)
    converted: dict[datetime, object] = {}

    def stored(time: datetime | None) -> object:
        time = time or now
        found = converted.get(time)
        if found is None:
            found = converted[time] = convert(time) if convert is not None else time
        return found

    rows = [(attempt_id, p.rank, p.name, p.step, p.value, stored(p.time)) for p in points]
    columns = ("attempt_id", "rank", "name", "step", "value", "time")
    driver = connection.connection.driver_connection  # the driver's, in this transaction
    assert driver is not None
    if dialect.name == "postgresql":
        statement = f"COPY {_METRIC_POINTS.name} ({', '.join(columns)}) FROM STDIN"
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
        return
    marks = ", ".join("?" for _ in columns)
    statement = f"INSERT INTO {_METRIC_POINTS.name} ({', '.join(columns)}) VALUES ({marks})"
    connection.exec_driver_sql(statement, rows)


def _update_series(session: Session, *, attempt_id: str, points: Sequence[MetricPointIn]) -> None:
    """Keep each touched series' count, step extent and last value current."""
    batches: dict[tuple[str, int], list[MetricPointIn]] = defaultdict(list)
    for p in points:
        batches[(p.name, p.rank)].append(p)
    known = {
        (s.name, s.rank): s
        for s in session.scalars(
            select(MetricSeries).where(
                MetricSeries.attempt_id == attempt_id,
                MetricSeries.name.in_({name for name, _ in batches}),
            )
        )
    }
    for (name, rank), batch in batches.items():
        newest = max(batch, key=lambda p: p.step)
        series = known.get((name, rank))
        if series is None:
            session.add(
                MetricSeries(
                    attempt_id=attempt_id,
                    name=name,
                    rank=rank,
                    count=len(batch),
                    min_step=min(p.step for p in batch),
                    max_step=newest.step,
                    last_value=newest.value,
                )
            )
            continue
        series.count += len(batch)
        series.min_step = min(series.min_step, *(p.step for p in batch))
        if newest.step >= series.max_step:
            series.max_step, series.last_value = newest.step, newest.value


def ingest_logs(session: Session, *, job_id: str, task: Task, lines: Sequence[LogLineIn]) -> None:
    _check_ranks(task, [line.rank for line in lines], "lines")
    if not lines:
        return
    now = utcnow()
    session.execute(
        insert(LogLine),
        [
            {
                "job_id": job_id,
                "task_id": task.id,
                "rank": line.rank,
                "level": line.level,
                "message": line.message,
                "time": line.time or now,
            }
            for line in lines
        ],
    )
    session.flush()


def read_logs(
    session: Session,
    *,
    job_id: str,
    task_id: str | None,
    after: int,
    limit: int,
    party_id: str | None = None,
) -> list[LogLine]:
    """Log lines after ``after``: of one task, or only of ``party_id``'s tasks, when given."""
    query = select(LogLine).where(LogLine.job_id == job_id, LogLine.id > after)
    if task_id is not None:
        query = query.where(LogLine.task_id == task_id)
    if party_id is not None:
        query = query.where(LogLine.task_id.in_(select(Task.id).where(Task.party_id == party_id)))
    return list(session.scalars(query.order_by(LogLine.id).limit(limit)).all())


def record_checkpoint(
    session: Session, *, job_id: str, task: Task, checkpoint: CheckpointIn
) -> None:
    check_hosted(task, checkpoint.rank, ("body", "rank"))
    session.add(
        Checkpoint(
            job_id=job_id,
            attempt_id=task.attempt_id,
            task_id=task.id,
            rank=checkpoint.rank,
            step=checkpoint.step,
            uri=checkpoint.uri,
            size=checkpoint.size,
            sha256=checkpoint.sha256,
            kind=checkpoint.kind,
        )
    )
    record_event(
        session,
        job_id=job_id,
        kind="checkpoint",
        data={
            "attempt": task.attempt.number,
            "rank": checkpoint.rank,
            "step": checkpoint.step,
            "kind": checkpoint.kind,
        },
    )
    session.flush()


def list_checkpoints(session: Session, *, job_id: str) -> list[tuple[Checkpoint, int, str]]:
    """Each checkpoint of the job with its attempt's number and the name of its rank's party."""
    rows = session.execute(
        select(Checkpoint, Attempt.number, Party.name)
        .join(Attempt, Checkpoint.attempt_id == Attempt.id)
        .join(Task, Checkpoint.task_id == Task.id)
        .join(Party, Task.party_id == Party.id)
        .where(Checkpoint.job_id == job_id)
        .order_by(Checkpoint.kind, Checkpoint.step, Checkpoint.rank, Checkpoint.id)
    ).all()
    return [(c, n, party) for c, n, party in rows]
