"""Workers: registering, heartbeats, and what is shown of them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from tessera_api.schemas.common import (
    AS_TEXT,
    MAX_INT,
    Address,
    Host,
    Id,
    Name200,
    Strict,
    TextCheck,
    Version64,
)


class Accelerator(Strict):
    name: Name200
    total_memory: Annotated[int, Field(ge=0, le=MAX_INT)]
    free_memory: Annotated[int, Field(ge=0, le=MAX_INT)]


class WorkerRegister(Strict):
    hostname: Host
    address: Address = ""
    cpu_count: Annotated[int, Field(ge=1, le=1_000_000)]
    memory_bytes: Annotated[int, Field(ge=0, le=MAX_INT)]
    torch_version: Version64 = ""
    accelerators: list[Accelerator] = Field(default_factory=list, max_length=64)
    csr: Annotated[str, Field(max_length=10_000, json_schema_extra=AS_TEXT), TextCheck] | None = (
        Field(
            default=None,
            description="A PEM certificate request for the worker's own key; the reply carries "
            "the certificate naming the worker's party",
        )
    )


class WorkerTaskPublic(BaseModel):
    """A task a worker holds that has not finished."""

    task_id: str
    job_id: str
    job_name: str
    status: str


class WorkerPublic(BaseModel):
    id: str
    party: str
    hostname: str
    address: str
    cpu_count: int
    memory_bytes: int
    torch_version: str
    accelerators: list[Accelerator]
    registered_at: datetime
    last_heartbeat: datetime
    online: bool
    running_tasks: list[WorkerTaskPublic] = Field(default_factory=list)
    certificate_expires_at: datetime | None = Field(
        default=None, description="When the worker's certificate expires (null: it has none)"
    )


class WorkerRegistered(WorkerPublic):
    certificate: str | None = Field(description="The worker's certificate (PEM), if it asked")
    ca_certificate: str = Field(description="The deployment's authority (PEM) to verify peers")


class Heartbeat(Strict):
    accelerators: list[Accelerator] | None = Field(default=None, max_length=64)
    running_tasks: list[Id] = Field(default_factory=list, max_length=1024)


class HeartbeatReply(BaseModel):
    stop_tasks: list[str]
    server_time: datetime
