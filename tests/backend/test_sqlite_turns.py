"""Write transactions on one SQLite file take turns inside the process (``sqlite_turns``)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError

from tessera_api import sqlite_turns
from tessera_api.db import make_engine


def _engine(path: Path, turn_timeout_s: float, busy_timeout_s: float = 30) -> Engine:
    engine = create_engine(
        f"sqlite:///{path}",
        connect_args={
            "check_same_thread": False,
            "timeout": busy_timeout_s,  # SQLite's own
            "factory": sqlite_turns.connection_class(turn_timeout_s),
        },
    )
    sqlite_turns.take_turns(engine)
    with engine.begin() as conn:
        conn.execute(text("PRAGMA journal_mode=WAL"))
        conn.execute(text("CREATE TABLE t (writer TEXT)"))
    return engine


def _writers(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [row[0] for row in conn.execute(text("SELECT writer FROM t ORDER BY rowid"))]


def test_the_backend_engine_takes_turns(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with engine.connect() as conn:
        assert isinstance(conn.connection.dbapi_connection, sqlite3.Connection)
        assert hasattr(conn.connection.dbapi_connection, "take_turn")


def test_a_writer_waits_for_the_one_before_it_and_goes_when_it_commits(tmp_path: Path) -> None:
    # SQLite's own busy timeout is 0: a writer that met the lock would fail at once, so the
    # second one succeeding shows it waited for its turn, not for SQLite
    engine = _engine(tmp_path / "db.sqlite", turn_timeout_s=10, busy_timeout_s=0)
    done: dict[str, float] = {}

    def second() -> None:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO t VALUES ('second')"))
        done["second"] = time.monotonic()

    with engine.connect() as first:
        first.execute(text("INSERT INTO t VALUES ('first')"))
        waiter = threading.Thread(target=second)
        waiter.start()
        time.sleep(0.3)
        assert "second" not in done  # still waiting for its turn
        done["first"] = time.monotonic()
        first.commit()
    waiter.join(timeout=10)
    assert done["second"] >= done["first"]
    assert _writers(engine) == ["first", "second"]
    # reads never wait for a turn
    with engine.connect() as writer, engine.connect() as reader:
        writer.execute(text("INSERT INTO t VALUES ('third')"))
        assert len(reader.execute(text("SELECT * FROM t")).all()) == 2
        writer.rollback()


def test_a_writer_whose_turn_does_not_come_is_told_the_database_is_locked(
    tmp_path: Path,
) -> None:
    engine = _engine(tmp_path / "db.sqlite", turn_timeout_s=0.2)
    with engine.connect() as first:
        first.execute(text("INSERT INTO t VALUES ('first')"))
        started = time.monotonic()
        with engine.connect() as second, pytest.raises(OperationalError) as refused:
            second.execute(text("UPDATE t SET writer = 'second'"))
        assert time.monotonic() - started < 5  # the turn's timeout, not SQLite's 30 s
        assert isinstance(refused.value.orig, sqlite3.OperationalError)
        assert "database is locked" in str(refused.value.orig)
        first.commit()
    assert _writers(engine) == ["first"]


@pytest.mark.parametrize("end", ["rollback", "close", "commit"])
def test_every_end_of_a_transaction_gives_the_turn_back(tmp_path: Path, end: str) -> None:
    engine = _engine(tmp_path / "db.sqlite", turn_timeout_s=0.2)
    first = engine.connect()
    first.execute(text("INSERT INTO t VALUES ('first')"))
    if end == "rollback":
        first.rollback()
    elif end == "commit":
        first.commit()
    else:
        first.invalidate()  # the driver's connection closed in the middle of its transaction
    first.close()  # back to the pool, which rolls back what is left
    for _ in range(3):  # every later transaction gets its turn again
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO t VALUES ('later')"))
    expected = ["first"] if end == "commit" else []
    assert _writers(engine) == [*expected, "later", "later", "later"]


def test_a_write_in_autocommit_mode_takes_no_turn(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "db.sqlite", turn_timeout_s=0.2)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("INSERT INTO t VALUES ('autocommitted')"))  # committed at once
        with engine.begin() as other:  # so nobody waits for a commit that never comes
            other.execute(text("INSERT INTO t VALUES ('next')"))
    assert _writers(engine) == ["autocommitted", "next"]
