"""The worker protocol: rendezvous, task credentials, task status and launch descriptions."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from tessera_api.schemas.common import AS_TEXT, Host, Rank, Strict, Text4000, TextCheck
from tessera_api.schemas.jobs import RankDevicePublic, ResumePoint


class RendezvousIn(Strict):
    host: Host
    port: Annotated[int, Field(ge=1, le=65535)]


class Rendezvous(BaseModel):
    host: str
    port: int
    secret: str = Field(
        description="What a rank presents to the store; only the attempt's workers see it"
    )


class TaskCredentialsIn(Strict):
    csr: Annotated[
        str, Field(min_length=1, max_length=10_000, json_schema_extra=AS_TEXT), TextCheck
    ] = Field(description="A PEM certificate request for a key made for this task alone")
    signature: Annotated[
        str, Field(min_length=1, max_length=1_000, json_schema_extra=AS_TEXT), TextCheck
    ] = Field(
        description="Base64 ECDSA signature, with the worker's own key, over the request's "
        "bytes, a newline and the task id"
    )


class TaskCredentials(BaseModel):
    token: str = Field(
        description="The task's credential: its ranks report metrics, logs and checkpoints "
        "with it; refused once the task has ended"
    )
    certificate: str = Field(description="Names the task's party and attempt (PEM)")
    ca_certificate: str
    expires_at: datetime


class TaskStatusIn(Strict):
    status: Literal["starting", "running", "succeeded", "failed", "cancelled"]
    reason: Text4000 | None = None
    exit_code: Annotated[int, Field(ge=-(2**31), le=2**31 - 1)] | None = None
    rank: Rank | None = None
    lost_peer: bool = Field(
        default=False,
        description="The failure looks like the loss of another rank (a connection reset): "
        "the control plane first looks for a worker that went silent, to blame that one",
    )


class LaunchDescription(BaseModel):
    task_id: str
    job_id: str
    attempt: int
    attempt_id: str
    approved: bool = Field(description="Whether this task's party approved the job")
    algorithm: str
    config: dict[str, Any]
    plan: list[dict[str, Any]]
    world_size: int
    ranks: list[RankDevicePublic]
    backend: Literal["gloo", "nccl"]
    rendezvous: Rendezvous | None
    resume_from: ResumePoint | None
    status: str
