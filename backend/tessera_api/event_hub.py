"""Wake a job's event streams when its events are stored, in every replica.

Events live in the database (``services.history.record_event``); a stream reads them from there
and then sleeps until woken. Whoever commits events wakes the streams of its own process at once;
on PostgreSQL the same transaction also sends ``NOTIFY tessera_events, '<job id>'``, delivered at
commit, and every replica's hub listens on one connection and wakes its streams, so a client of
any replica sees events stored through any other. A stream still rechecks after ``idle_s`` in
case a wake was lost (the listener reconnecting, say).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

CHANNEL = "tessera_events"
CLOSE_CHECK_S = 0.2
"""How often the listener, between notifications, looks whether the hub was closed (and so
the longest a server's stop waits for it)."""
CHANGED = "tessera.jobs_with_new_events"
"""The ``Session.info`` key under which ``record_event`` notes the jobs it wrote events of."""

log = logging.getLogger("tessera.events")
_NOTIFY = text("SELECT pg_notify(:channel, :payload)")


def note_new_event(session: Session, job_id: str) -> None:
    """Mark ``job_id`` for a wake once ``session`` commits (and NOTIFY on PostgreSQL)."""
    jobs: set[str] = session.info.setdefault(CHANGED, set())
    if job_id in jobs:
        return
    jobs.add(job_id)
    if session.get_bind().dialect.name == "postgresql":
        # part of the transaction: delivered at commit, dropped with a rollback
        with session.no_autoflush:
            session.execute(_NOTIFY, {"channel": CHANNEL, "payload": job_id})


class EventHub:
    """Per process: the streams waiting for a job's next events, and who wakes them."""

    def __init__(self, database_url: str) -> None:
        url = make_url(database_url)
        self._dsn = (
            url.set(drivername="postgresql").render_as_string(hide_password=False)
            if url.get_backend_name() == "postgresql"
            else None
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: dict[str, asyncio.Event] = {}
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self.stopping = False
        """Set when the server was asked to stop: streams end at once, cleanly, instead of
        holding the shutdown for its grace period."""

    # -- the streams' side (in the event loop) ----------------------------------------------
    def ticket(self, job_id: str) -> asyncio.Event:
        """Take before reading the events: set by any wake for ``job_id`` after this call."""
        self._loop = asyncio.get_running_loop()
        return self._waiting.setdefault(job_id, asyncio.Event())

    async def wait(self, ticket: asyncio.Event, timeout_s: float) -> bool:
        """Whether the ticket was woken within ``timeout_s``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ticket.wait(), timeout_s)
        return ticket.is_set()

    # -- the writers' side (any thread) -----------------------------------------------------
    def wake(self, job_ids: Iterable[str]) -> None:
        self._in_loop(self._wake, list(job_ids))

    def _in_loop(self, callback: Callable[..., None], *args: Any) -> None:
        """Run ``callback`` in the streams' event loop (none yet: no stream to wake)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(callback, *args)

    def _wake(self, job_ids: list[str]) -> None:
        for job_id in job_ids:
            ticket = self._waiting.pop(job_id, None)
            if ticket is not None:
                ticket.set()

    def _wake_everyone(self) -> None:
        waiting, self._waiting = self._waiting, {}
        for ticket in waiting.values():
            ticket.set()

    def watch(self, factory: sessionmaker[Session]) -> None:
        """Wake this process's streams after each commit of ``factory``'s sessions with events."""

        def committed(session: Session) -> None:
            jobs = session.info.pop(CHANGED, None)
            if jobs:
                self.wake(jobs)

        def rolled_back(session: Session) -> None:
            session.info.pop(CHANGED, None)

        event.listen(factory, "after_commit", committed)
        event.listen(factory, "after_soft_rollback", lambda session, _tx: rolled_back(session))

    def end_streams(self) -> None:
        """Ask every stream of this process to end (from a signal handler or any thread)."""
        self.stopping = True
        self._in_loop(self._wake_everyone)

    def _end_streams_on_exit_signals(self) -> None:
        """Chain ``end_streams`` before the server's own SIGINT/SIGTERM handlers (installed by
        then in the main thread), which wait for open responses to complete before stopping."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous = signal.getsignal(signum)
            if not callable(previous):
                continue

            def handler(sig: int, frame: FrameType | None, previous: Any = previous) -> None:
                self.end_streams()
                previous(sig, frame)

            signal.signal(signum, handler)

    # -- the PostgreSQL listener -----------------------------------------------------------
    def start(self) -> None:
        """At the server's start, in its event loop."""
        with contextlib.suppress(RuntimeError):  # no loop running: nothing to end streams in
            self._loop = asyncio.get_running_loop()
        self._end_streams_on_exit_signals()
        if self._dsn is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._listen, name="event-listener", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _listen(self) -> None:
        import psycopg

        assert self._dsn is not None
        backoff = 0.5
        while not self._closed.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    backoff = 0.5
                    # anything stored while this was not listening: let every stream look
                    self._in_loop(self._wake_everyone)
                    while not self._closed.is_set():
                        for note in conn.notifies(timeout=CLOSE_CHECK_S):
                            self.wake([note.payload])
            except psycopg.Error as exc:
                log.warning("event listener lost its connection (%s); reconnecting", exc)
                self._closed.wait(backoff)
                backoff = min(backoff * 2, 10.0)
