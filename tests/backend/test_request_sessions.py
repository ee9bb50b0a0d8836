"""A burst of requests larger than the thread pool and the connection pool is served in full,
with no more than ``REQUEST_SESSIONS`` connections (SQLite's number) taken by requests at once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import event

from tessera_api.app import create_app
from tessera_api.db import POOL_OVERFLOW, POOL_SIZE, REQUEST_SESSIONS
from tessera_api.models import Base
from tessera_api.settings import Settings
from tests.backend.conftest import ADMIN_TOKEN, SPECS

BURST = 150
"""More requests at once than the 40 threads that run routes and the 15 pooled connections."""


def test_a_burst_is_answered_in_full_within_the_session_bound(tmp_path: Path) -> None:
    assert max(REQUEST_SESSIONS.values()) < POOL_SIZE + POOL_OVERFLOW
    settings = Settings(
        home=tmp_path, database_url=f"sqlite:///{tmp_path / 't.db'}", admin_token=ADMIN_TOKEN
    )
    app = create_app(settings, specs=SPECS)
    engine = app.state.engine
    Base.metadata.create_all(engine)
    taken = {"now": 0, "most": 0}

    def checkout(*_: Any) -> None:
        taken["now"] += 1
        taken["most"] = max(taken["most"], taken["now"])

    def checkin(*_: Any) -> None:
        taken["now"] -= 1

    event.listen(engine, "checkout", checkout)
    event.listen(engine, "checkin", checkin)
    party = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    async def burst() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            created = await client.post("/api/v1/parties", json={"name": "alice"}, headers=party)
            assert created.status_code == 201, created.text
            alice = {"Authorization": f"Bearer {created.json()['token']}"}
            taken["most"] = 0
            calls = [
                client.get("/api/v1/jobs", headers=alice if i % 2 else party) for i in range(BURST)
            ]
            return await asyncio.gather(*calls)

    try:
        responses = asyncio.run(burst())
    finally:
        engine.dispose()
    assert [r.status_code for r in responses] == [200] * BURST
    assert all(r.json() == {"data": [], "count": 0} for r in responses)
    assert 1 <= taken["most"] <= REQUEST_SESSIONS["sqlite"]
