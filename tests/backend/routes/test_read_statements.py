"""How many statements the dashboard's frequent reads send to the database.

Under load the round trips decide what a read costs (each is a wait on the server and Python
work on both sides), so the count of each read is held here, for the admin and for a party
whose role sees only some of the others' metrics (the reads with the most to check). The answers
themselves are checked by the routes' own tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import event

from tests.backend.factories import ADMIN, API
from tests.backend.routes.test_visibility import split_job

READS = {
    # route: (path under the job, statements for the admin, for a party)
    "jobs list": ("/jobs", 2, 3),  # [token,] page with its count, parties of the page's jobs
    "job": ("/jobs/{id}", 3, 4),  # [token,] job with roles, attempts, tasks; assignments; approvals
    "metrics": ("/jobs/{id}/metrics", 3, 5),  # [token,] job, attempt[, own ranks], series
    "events": ("/jobs/{id}/events?once=true", 2, 3),  # [token,] job with roles, events
}


@contextmanager
def counted(client: TestClient) -> Iterator[list[str]]:
    statements: list[str] = []

    def note(*args: Any) -> None:
        statements.append(args[2])

    engine = client.app.state.engine  # type: ignore[attr-defined]
    event.listen(engine, "before_cursor_execute", note)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", note)


def test_each_frequent_read_sends_a_fixed_number_of_statements(client: TestClient) -> None:
    job = split_job(client)
    caller = {"admin": ADMIN, "party": job.feature.auth}
    for route, (path, *expected) in READS.items():
        for who, want in zip(caller, expected, strict=True):
            for _ in range(2):  # the first read may warm caches; the second is the steady one
                with counted(client) as statements:
                    response = client.get(API + path.format(id=job.id), headers=caller[who])
            assert response.status_code == 200, (route, who, response.text)
            assert len(statements) == want, (route, who, statements)


def test_a_page_past_the_end_still_counts_every_job(client: TestClient) -> None:
    split_job(client)
    with counted(client) as statements:
        page = client.get(f"{API}/jobs?offset=5", headers=ADMIN).json()
    assert page == {"data": [], "count": 1}
    assert len(statements) == 2  # the empty page, then the count alone
