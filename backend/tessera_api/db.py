"""Engine and session factory."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from tessera_api import sqlite_turns

POOL_SIZE = 5
POOL_OVERFLOW = 10
"""SQLAlchemy's own defaults, named: at most 15 connections per process."""

SQLITE_BUSY_TIMEOUT_S = 30.0
"""How long a write on SQLite waits for the one before it before failing with 'database is
locked'."""

REQUEST_SESSIONS = {"sqlite": 3, "postgresql": 5}
"""How many requests of a process hold a session at once, by database; the others wait their turn
in the event loop, holding no thread. Few on SQLite, because the routes are Python under one
interpreter lock: with more threads running queries at once, every query handing the lock over
(SQLite's does so for each row) made them take turns thread by thread, and the process spent its
time switching. More on PostgreSQL, where a request mostly waits for the database server's
answers with the lock released: three at a time left one process idle between round trips and
saturated it short of 200 requests/s (p99 574 ms); eight brought that to 72 ms but, with two
replicas sharing the database server, raised theirs from 19 to 88 ms; five gave 129 ms and 48 ms
(docs/api.md). Fewer than the pool's connections, so that sessions made outside requests (an
events stream's reads, the scheduler) always find one; fewer than the thread pool's threads, so
that a request holding a connection always gets the thread it needs next. Unbounded, under load
every thread could wait for a connection while every connection waited, held by a request whose
response was being checked, for a thread: nothing moved until the pool gave up after 30 s."""


def make_engine(url: str) -> Engine:
    """An engine tuned for the backend: SQLite gets WAL, foreign keys, a busy timeout and write
    transactions that take turns in the process (``sqlite_turns``)."""
    if url.startswith("sqlite"):
        in_memory = make_url(url).database in (None, "", ":memory:")
        pool = {} if in_memory else {"pool_size": POOL_SIZE, "max_overflow": POOL_OVERFLOW}
        connect: dict[str, Any] = {
            "check_same_thread": False,
            "timeout": SQLITE_BUSY_TIMEOUT_S,
            "factory": sqlite_turns.connection_class(SQLITE_BUSY_TIMEOUT_S),
        }
        engine = create_engine(url, connect_args=connect, **pool)
        event.listen(engine, "connect", _sqlite_pragmas)
        sqlite_turns.take_turns(engine)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def make_read_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions for the dashboard's reads (``deps.Reads``): on PostgreSQL each statement runs
    on its own, without the BEGIN and ROLLBACK round trips a transaction adds to a read of a
    few queries (its statements may then see commits made between them, as separate page
    loads would). SQLite's transactions cost no round trip: unchanged there."""
    if engine.dialect.name == "postgresql":
        engine = engine.execution_options(isolation_level="AUTOCOMMIT")
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def scratch_postgres(url: str, prefix: str = "tessera_scratch") -> Iterator[str]:
    """The URL of a new database on ``url``'s PostgreSQL server, dropped afterwards (benchmarks
    and tests that need a database of their own)."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    server = make_url(url).set(database="postgres")
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
