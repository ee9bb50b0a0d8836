"""Settings from the environment, and the refusal of default secrets in production."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tessera_api.scheduling.service import create_scheduled_app
from tessera_api.settings import DEFAULT_ADMIN_TOKEN, Mode, Settings


def test_environment_prefix_and_sqlite_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.setenv("TESSERA_ADMIN_TOKEN", "s3cret")
    monkeypatch.setenv("TESSERA_WORKER_OFFLINE_AFTER_S", "12.5")
    monkeypatch.setenv("TESSERA_TASK_START_TIMEOUT_S", "45")
    monkeypatch.delenv("TESSERA_DATABASE_URL", raising=False)
    settings = Settings()
    assert settings.admin_token == "s3cret" and settings.worker_offline_after_s == 12.5
    assert settings.task_start_timeout_s == 45
    assert create_scheduled_app(settings).state.scheduler.start_timeout_s == 45
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'tessera.db'}"


def test_the_task_start_timeout_defaults_to_five_minutes_and_must_be_positive() -> None:
    assert Settings().task_start_timeout_s == 300
    with pytest.raises(ValidationError, match="task_start_timeout_s"):
        Settings(task_start_timeout_s=0)


@pytest.mark.parametrize("token", ["", DEFAULT_ADMIN_TOKEN, "short"])
def test_production_refuses_weak_admin_tokens(token: str) -> None:
    with pytest.raises(ValidationError, match="TESSERA_ADMIN_TOKEN"):
        Settings(mode=Mode.production, admin_token=token)


def test_production_accepts_a_real_secret() -> None:
    settings = Settings(mode=Mode.production, admin_token="x" * 32, database_url="sqlite://")
    assert settings.mode is Mode.production
