"""What the API tells about the algorithms it ships."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class RolePublic(BaseModel):
    name: str
    min: int
    max: int | None
    description: str = ""
    max_processes: int | None = Field(
        default=None, description="Processes one party may run for the role (null: no limit)"
    )
    devices: list[Literal["cpu", "cuda"]] = Field(
        default=["cpu"], description="Where the role's ranks can run"
    )
    gpu_benefit: bool = Field(
        default=False, description="A GPU makes the role faster: device auto asks for one"
    )
    device_note: str = Field(default="", description="Why the role runs where it does")
    sees_metrics: list[str] = Field(
        default=["*"],
        description="Metric names (shell-style patterns) the role's parties read from other "
        "parties' ranks; a party always reads its own ranks' metrics",
    )


class AlgorithmPublic(BaseModel):
    name: str
    title: str
    description: str
    roles: list[RolePublic]
    config_schema: dict[str, Any]
    metrics: list[str]
    one_device_type: bool = Field(
        default=False, description="Every rank of a job must run on the same kind of device"
    )
