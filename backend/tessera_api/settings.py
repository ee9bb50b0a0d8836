"""Configuration from ``TESSERA_*`` environment variables."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tessera_worker.home import default_home

DEFAULT_ADMIN_TOKEN = "tessera-dev-admin-token"


class Mode(StrEnum):
    development = "development"
    production = "production"


class Settings(BaseSettings):
    """Everything the control plane reads from its environment."""

    model_config = SettingsConfigDict(env_prefix="TESSERA_", extra="ignore")

    home: Path = Field(default_factory=default_home)
    database_url: str = ""
    admin_token: str = DEFAULT_ADMIN_TOKEN
    mode: Mode = Mode.development
    broker_url: str = "redis://127.0.0.1:6379/0"
    worker_offline_after_s: float = Field(default=30.0, gt=0)
    task_start_timeout_s: float = Field(default=300.0, gt=0)
    lost_worker_after_s: float = Field(
        default=5.0,
        gt=0,
        description="Once a rank reported a lost peer, a worker of its attempt silent this long "
        "(2.5 heartbeats) is taken for the one that was lost",
    )
    blame_window_s: float = Field(
        default=8.0,
        gt=0,
        description="How long a lost-peer report waits for a silent worker to blame before it "
        "fails the attempt itself",
    )
    scheduler_lease_s: float = Field(
        default=10.0,
        gt=0,
        description="How long the replica that schedules holds its lease between renewals; "
        "when it dies, another replica takes over after at most this long",
    )
    run_scheduler: bool = Field(
        default=True,
        description="Whether this process takes part in scheduling (false: it only queues jobs; "
        "`tessera api --no-scheduler`)",
    )
    frontend_dist: Path | None = None
    ca_dir: Path | None = Field(
        default=None,
        description="Where the deployment's certificate authority lives (default: home/ca); "
        "replicas of the control plane must share it",
    )

    artifacts_dir: Path | None = Field(
        default=None,
        description="Where checkpoint files that workers share are kept (default: "
        "home/artifacts); replicas of the control plane must share it",
    )
    max_checkpoint_file_bytes: int = Field(
        default=1 << 30,
        gt=0,
        description="The largest checkpoint file a worker may upload",
    )

    @model_validator(mode="after")
    def _refuse_default_secret(self) -> Self:
        weak = not self.admin_token or self.admin_token == DEFAULT_ADMIN_TOKEN
        if self.mode is Mode.production and (weak or len(self.admin_token) < 16):
            raise ValueError(
                "TESSERA_ADMIN_TOKEN must be set to a secret of at least 16 characters "
                "in production mode"
            )
        if not self.admin_token:
            raise ValueError("TESSERA_ADMIN_TOKEN must not be empty")
        return self

    @property
    def resolved_ca_dir(self) -> Path:
        return self.ca_dir if self.ca_dir is not None else self.home / "ca"

    @property
    def resolved_artifacts_dir(self) -> Path:
        return self.artifacts_dir if self.artifacts_dir is not None else self.home / "artifacts"

    @property
    def resolved_database_url(self) -> str:
        """The configured URL, or a SQLite file under ``home``."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home / 'tessera.db'}"
