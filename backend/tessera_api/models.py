"""Database tables as SQLAlchemy 2 typed models. API shapes live in ``schemas``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {datetime: UTCDateTime, dict[str, Any]: JSON, list[Any]: JSON}


class Party(Base):
    __tablename__ = "parties"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    display_name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # the party's policy: whose jobs it approves unasked, what its workers may run
    auto_approve_from: Mapped[list[Any]] = mapped_column(default=list)
    allowed_algorithms: Mapped[list[Any] | None] = mapped_column(default=None)
    custom_code: Mapped[bool] = mapped_column(Boolean, default=False)


class Worker(Base):
    __tablename__ = "workers"
    __table_args__ = (UniqueConstraint("party_id", "hostname"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    party_id: Mapped[str] = mapped_column(ForeignKey("parties.id", ondelete="CASCADE"), index=True)
    hostname: Mapped[str] = mapped_column(String(255))
    address: Mapped[str] = mapped_column(String(255))
    cpu_count: Mapped[int] = mapped_column(Integer)
    memory_bytes: Mapped[int] = mapped_column(BigInteger)
    torch_version: Mapped[str] = mapped_column(String(64))
    accelerators: Mapped[list[Any]] = mapped_column(default=list)
    registered_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_heartbeat: Mapped[datetime] = mapped_column(default=utcnow)
    certificate: Mapped[str | None] = mapped_column(Text, default=None)
    certificate_expires_at: Mapped[datetime | None] = mapped_column(default=None)

    party: Mapped[Party] = relationship(lazy="joined")


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("creator", "idempotency_key"),
        Index("ix_jobs_status_created", "status", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200))
    algorithm: Mapped[str] = mapped_column(String(63), index=True)
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str] = mapped_column(Text, default="")
    priority: Mapped[int] = mapped_column(Integer, default=0)
    device: Mapped[str] = mapped_column(String(8), default="auto")
    created_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), default=None)
    idempotency_hash: Mapped[str | None] = mapped_column(String(64), default=None)
    creator: Mapped[str] = mapped_column(String(80))
    tags: Mapped[list[Any]] = mapped_column(default=list)
    """The job's tags in the order given; ``tag_rows`` holds each once more, to be searched."""

    tag_rows: Mapped[list[JobTag]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True
    )
    assignments: Mapped[list[RoleAssignment]] = relationship(
        order_by="RoleAssignment.position", cascade="all, delete-orphan", passive_deletes=True
    )
    attempts: Mapped[list[Attempt]] = relationship(
        order_by="Attempt.number", cascade="all, delete-orphan", passive_deletes=True
    )
    approvals: Mapped[list[Approval]] = relationship(
        order_by="Approval.id", cascade="all, delete-orphan", passive_deletes=True
    )


class JobTag(Base):
    """One tag of one job: the jobs carrying a tag are found by an exact, indexed comparison
    on every database (JSON containment is spelled differently by each)."""

    __tablename__ = "job_tags"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(32), primary_key=True, index=True)


class Approval(Base):
    """One party's consent to one job: pending until it approves or rejects."""

    __tablename__ = "approvals"
    __table_args__ = (UniqueConstraint("job_id", "party_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    party_id: Mapped[str] = mapped_column(ForeignKey("parties.id"), index=True)
    decision: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    decided_by: Mapped[str | None] = mapped_column(String(80), default=None)
    decided_at: Mapped[datetime | None] = mapped_column(default=None)

    party: Mapped[Party] = relationship(lazy="joined")


class RoleAssignment(Base):
    __tablename__ = "role_assignments"
    __table_args__ = (UniqueConstraint("job_id", "party_id", "role"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    party_id: Mapped[str] = mapped_column(ForeignKey("parties.id"), index=True)
    role: Mapped[str] = mapped_column(String(63))
    position: Mapped[int] = mapped_column(Integer)
    processes: Mapped[int] = mapped_column(Integer, default=1)
    dataset: Mapped[str | None] = mapped_column(String(1024), default=None)
    capacity: Mapped[list[Any] | None] = mapped_column(default=None)
    options: Mapped[dict[str, Any]] = mapped_column(default=dict)

    party: Mapped[Party] = relationship(lazy="joined")


class Attempt(Base):
    __tablename__ = "attempts"
    __table_args__ = (UniqueConstraint("job_id", "number"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    failure_code: Mapped[str | None] = mapped_column(String(63), default=None)
    failure_reason: Mapped[str | None] = mapped_column(Text, default=None)
    resume_step: Mapped[int | None] = mapped_column(BigInteger, default=None)
    resume_uri: Mapped[str | None] = mapped_column(String(2048), default=None)
    plan: Mapped[list[Any]] = mapped_column(default=list)
    rendezvous_host: Mapped[str | None] = mapped_column(String(255), default=None)
    rendezvous_port: Mapped[int | None] = mapped_column(Integer, default=None)
    rendezvous_secret: Mapped[str | None] = mapped_column(String(64), default=None)

    tasks: Mapped[list[Task]] = relationship(
        order_by="Task.created_at", cascade="all, delete-orphan", passive_deletes=True
    )


class Task(Base):
    __tablename__ = "tasks"
    __table_args__ = (UniqueConstraint("attempt_id", "party_id", "worker_id"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    attempt_id: Mapped[str] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    party_id: Mapped[str] = mapped_column(ForeignKey("parties.id"), index=True)
    worker_id: Mapped[str] = mapped_column(ForeignKey("workers.id"), index=True)
    ranks: Mapped[list[Any]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text, default=None)
    exit_code: Mapped[int | None] = mapped_column(Integer, default=None)
    failed_rank: Mapped[int | None] = mapped_column(Integer, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    last_heartbeat: Mapped[datetime | None] = mapped_column(default=None)
    # the task's own credential for its ranks' reports; valid while the task is live
    credential_hash: Mapped[str | None] = mapped_column(String(64), default=None, unique=True)
    lost_peer: Mapped[bool] = mapped_column(Boolean, default=False)
    """It failed only because another rank went away: the attempt's cause is sought elsewhere."""

    party: Mapped[Party] = relationship(lazy="joined")
    attempt: Mapped[Attempt] = relationship(back_populates="tasks")


class MetricPoint(Base):
    __tablename__ = "metric_points"
    # Covering: a series' step range is read from the index alone.
    __table_args__ = (
        Index("ix_metric_points_series_steps", "attempt_id", "name", "rank", "step", "value"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    attempt_id: Mapped[str] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    rank: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(128))
    step: Mapped[int] = mapped_column(BigInteger)
    value: Mapped[float] = mapped_column(Float)
    time: Mapped[datetime] = mapped_column(default=utcnow)


class MetricSeries(Base):
    """One (attempt, name, rank) series with its extent, kept current by ingest."""

    __tablename__ = "metric_series"
    __table_args__ = (UniqueConstraint("attempt_id", "name", "rank"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    attempt_id: Mapped[str] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(128))
    rank: Mapped[int] = mapped_column(Integer)
    count: Mapped[int] = mapped_column(BigInteger)
    min_step: Mapped[int] = mapped_column(BigInteger)
    max_step: Mapped[int] = mapped_column(BigInteger)
    last_value: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class LogLine(Base):
    __tablename__ = "log_lines"
    __table_args__ = (Index("ix_log_lines_job_cursor", "job_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"), index=True)
    rank: Mapped[int] = mapped_column(Integer)
    level: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text)
    time: Mapped[datetime] = mapped_column(default=utcnow)


ARTIFACT_CHECKPOINT = "checkpoint"


class Checkpoint(Base):
    __tablename__ = "checkpoints"
    __table_args__ = (Index("ix_checkpoints_job_step", "job_id", "step"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt_id: Mapped[str] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"))
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"))
    rank: Mapped[int] = mapped_column(Integer)
    step: Mapped[int] = mapped_column(BigInteger)
    uri: Mapped[str] = mapped_column(String(2048))
    size: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    kind: Mapped[str] = mapped_column(String(16), default=ARTIFACT_CHECKPOINT)
    """checkpoint (a retry resumes from these), export or model (results of a finished run)"""


class StatusTransition(Base):
    """Audit of every status change of a job, an attempt or a task."""

    __tablename__ = "status_transitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    entity: Mapped[str] = mapped_column(String(16))
    entity_id: Mapped[str] = mapped_column(String(32))
    from_status: Mapped[str | None] = mapped_column(String(16), default=None)
    to_status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Event(Base):
    """What the events stream serves; ids increase, so a client resumes after the last seen."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_job_cursor", "job_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(32))
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Lease(Base):
    """A duty exactly one replica of the control plane performs (the scheduler), who holds it
    and until when; the holder renews it, and another replica takes it once it lapsed."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(128), default=None)
    expires_at: Mapped[datetime] = mapped_column(default=utcnow)
