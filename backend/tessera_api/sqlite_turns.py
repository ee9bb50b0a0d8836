"""Write transactions on one SQLite file take turns inside the process.

SQLite lets one transaction write at a time. A second writer that finds the file locked is put
to sleep by SQLite's busy handler for 1, 2, 5, 10 … and then 100 ms at a time, whether or not the
lock was freed meanwhile; the sleeper holds its request's session all the while, and the
requests queued behind it wait too (under ingest load most of the dashboard's slow answers were
that sleep). Here a write transaction first takes the engine's turn, a lock in this process,
and gives it back when its connection commits or rolls back: a waiting writer starts the moment
the one before it is done. Writers in other processes (a migration, a second ``tessera api`` on
the same file) still meet SQLite's own lock and its busy timeout.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, event

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def connection_class(timeout_s: float) -> type[sqlite3.Connection]:
    """A connection class (``sqlite3.connect(factory=...)``) whose write transactions share one
    turn: one class, and so one turn, per engine."""
    turn = threading.Lock()

    class TurnTakingConnection(sqlite3.Connection):
        holds_turn = False

        def take_turn(self) -> None:
            if not turn.acquire(timeout=timeout_s):
                # what SQLite itself says when its busy timeout runs out
                raise sqlite3.OperationalError("database is locked")
            self.holds_turn = True

        def give_turn_back(self) -> None:
            if self.holds_turn:
                self.holds_turn = False
                turn.release()

        def _ending(self, end: Callable[[], None]) -> None:
            try:
                end()
            finally:
                self.give_turn_back()

        def commit(self) -> None:
            self._ending(super().commit)

        def rollback(self) -> None:
            self._ending(super().rollback)

        def close(self) -> None:
            self._ending(super().close)

    return TurnTakingConnection


def take_turns(engine: Engine) -> None:
    """Make each statement that writes take its connection's turn first (the driver opens the
    transaction at a transaction's first write, so that is where the turn is taken)."""

    @event.listens_for(engine, "before_cursor_execute")
    def _before(
        _conn: Any, cursor: Any, statement: str, _params: Any, _context: Any, _many: bool
    ) -> None:
        connection = cursor.connection
        if getattr(connection, "holds_turn", True) or connection.isolation_level is None:
            return  # holds it already, another engine's, or autocommit (no commit to give it back)
        if statement.lstrip()[:7].upper().startswith(_WRITES):
            connection.take_turn()
