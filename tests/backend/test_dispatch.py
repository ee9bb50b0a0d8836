"""Routes hand jobs to the dispatcher given to the app factory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tessera_api.app import create_app
from tessera_api.dispatch import QueueDispatcher
from tessera_api.models import Base
from tessera_api.settings import Settings
from tests.backend.conftest import ADMIN_TOKEN, SPECS
from tests.backend.factories import ADMIN, API, create_party, get_job


class RecordingDispatcher(QueueDispatcher):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def submit(self, session: Session, *, job_id: str) -> None:
        from tessera_api.models import Job

        job = session.get(Job, job_id)
        assert job is not None
        self.calls.append(("submit", job_id, job.status))
        super().submit(session, job_id=job_id)

    def cancel(self, session: Session, *, job_id: str) -> None:
        self.calls.append(("cancel", job_id, ""))


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[TestClient, RecordingDispatcher]]:
    dispatcher = RecordingDispatcher()
    settings = Settings(home=tmp_path, admin_token=ADMIN_TOKEN)
    app = create_app(settings, dispatcher=dispatcher, specs=SPECS)
    Base.metadata.create_all(app.state.engine)
    with TestClient(app) as client:
        yield client, dispatcher


def test_create_cancel_retry_reach_the_dispatcher(
    recorded: tuple[TestClient, RecordingDispatcher],
) -> None:
    client, dispatcher = recorded
    party = create_party(client)
    body = {
        "name": "j",
        "algorithm": "solo",
        "assignments": [{"party": party.name, "role": "trainer"}],
    }
    job = client.post(f"{API}/jobs", json=body, headers=ADMIN).json()
    client.post(f"{API}/jobs/{job['id']}/cancel", headers=ADMIN)
    client.post(f"{API}/jobs/{job['id']}/retry", headers=ADMIN)
    assert dispatcher.calls == [
        ("submit", job["id"], "pending"),
        ("cancel", job["id"], ""),
        ("submit", job["id"], "pending"),
    ]
    assert get_job(client, job["id"])["status"] == "queued"
