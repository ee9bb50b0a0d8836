"""What the API tells about the algorithms it ships."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class RolePublic(BaseModel):
    name: str
    min: int
    max: int | None
    description: str = ""
    max_processes: int | None = Field(
        default=None, description="Processes one party may run for the role (null: no limit)"
    )


class AlgorithmPublic(BaseModel):
    name: str
    title: str
    description: str
    roles: list[RolePublic]
    config_schema: dict[str, Any]
    metrics: list[str]
