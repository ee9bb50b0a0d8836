"""One scheduler among replicas: a lease row in the shared database.

Every replica of the control plane runs a scheduler loop, but only the holder of the
``scheduler`` lease places jobs and judges workers. The holder renews the lease at each pass;
when it stops renewing (it died, hung or lost the database), the lease lapses after ``ttl_s`` and
the first replica to try takes it over. A replica that stops cleanly gives the lease back, so
another takes over at its next pass.

Expiry is judged by each replica's clock: replicas need clocks agreeing to well under ``ttl_s``
(NTP gives milliseconds).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tessera_api.models import Lease as LeaseRow
from tessera_api.models import utcnow


def holder_name() -> str:
    """Who this process is, in the lease row and in logs: host, process and a nonce."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Lease:
    def __init__(
        self,
        session_factory: Callable[[], Session],
        *,
        name: str = "scheduler",
        ttl_s: float = 10.0,
        holder: str | None = None,
    ) -> None:
        self._sessions = session_factory
        self.name = name
        self.ttl_s = ttl_s
        self.holder = holder or holder_name()

    def hold(self) -> bool:
        """Take the lease if it is free or lapsed, renew it if held; whether this holds it."""
        now = utcnow()
        with self._sessions() as session:
            taken = session.execute(
                update(LeaseRow)
                .where(
                    LeaseRow.name == self.name,
                    or_(
                        LeaseRow.holder == self.holder,
                        LeaseRow.holder.is_(None),
                        LeaseRow.expires_at < now,
                    ),
                )
                .values(holder=self.holder, expires_at=now + timedelta(seconds=self.ttl_s))
                .execution_options(synchronize_session=False)
            )
            if taken.rowcount == 1:  # type: ignore[attr-defined]
                session.commit()
                return True
            if session.get(LeaseRow, self.name) is not None:
                return False
            session.add(
                LeaseRow(
                    name=self.name,
                    holder=self.holder,
                    expires_at=now + timedelta(seconds=self.ttl_s),
                )
            )
            try:
                session.commit()
            except IntegrityError:  # another replica created it first
                return False
            return True

    def release(self) -> None:
        """Give the lease back (if held), so another replica takes over without waiting."""
        with self._sessions() as session:
            session.execute(
                update(LeaseRow)
                .where(LeaseRow.name == self.name, LeaseRow.holder == self.holder)
                .values(holder=None, expires_at=utcnow())
                .execution_options(synchronize_session=False)
            )
            session.commit()

    def current_holder(self) -> str | None:
        """Who holds the lease now (None when free or lapsed)."""
        with self._sessions() as session:
            row = session.get(LeaseRow, self.name)
            if row is None or row.expires_at < utcnow():
                return None
            return row.holder
