"""Jobs: submitting them, their attempts, tasks and approvals, and their history."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from tessera_api.limits import (
    MAX_JOB_OPTIONS_BYTES,
    JsonProblem,
    control_character,
    json_size,
)
from tessera_api.schemas.common import (
    AS_NAME,
    ConfigJson,
    Name63,
    NameCheck,
    OptionsJson,
    Step,
    Strict,
    Text200,
    Text2000,
    json_problem,
)
from tessera_ml.spec import Assignment, JobDevice, integral_numbers


class AssignmentIn(Assignment):
    """One party playing one role; options as in the algorithm's role table."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)

    party: Name63 = Field(description="Slug name of the party")
    role: Name63 = Field(description="Role name from the algorithm's role table")
    dataset: Annotated[str, Field(max_length=1024, json_schema_extra=AS_NAME), NameCheck] | None = (
        Field(
            default=None,
            description="Party-local dataset reference, resolved on the party's worker",
        )
    )
    capacity: list[float] | None = Field(
        default=None,
        max_length=64,
        description="Relative capacity hint per process (e.g. free memory share)",
    )
    options: OptionsJson = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        return integral_numbers(data)


def _visible(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank_name", "a job name needs a character other than spaces")
    return value


JobName = Annotated[
    Text200,
    AfterValidator(_visible),
    Field(
        json_schema_extra={
            "pattern": r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$"
        }
    ),
]
"""A job's name: no control characters, and not only spaces."""

MAX_TAGS = 16
MAX_TAG_LENGTH = 32
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.:/-]*$"
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.:/-]*")


def _tag(value: str) -> str:
    if (reason := control_character(value)) is not None:
        raise PydanticCustomError("control_character", reason)
    if _TAG.fullmatch(value) is None:
        raise PydanticCustomError(
            "tag_characters",
            "a tag starts with a letter or a digit and holds only letters, digits, spaces "
            "and _ . : / -",
        )
    return value


TagCheck = AfterValidator(_tag)
"""Refuses a tag of other characters than ``TAG_PATTERN`` allows, saying which rule it breaks."""

Tag = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_TAG_LENGTH,
        json_schema_extra={"pattern": TAG_PATTERN},
        description="A label to find the job by, e.g. `baseline` or `sweep:lr/0.1`",
    ),
    TagCheck,
]
"""A job's tag: 1 to 32 characters, ASCII letters and digits first, then also spaces and
``_ . : / -``."""


def _distinct(tags: list[str]) -> list[str]:
    return list(dict.fromkeys(tags))


Tags = Annotated[
    list[Tag],
    Field(
        max_length=MAX_TAGS,
        description=f"At most {MAX_TAGS} tags; a repeated tag is kept once, in its first place",
    ),
    AfterValidator(_distinct),
]


class JobCreate(Strict):
    name: JobName
    algorithm: Name63
    config: ConfigJson = Field(default_factory=dict)
    assignments: list[AssignmentIn] = Field(min_length=1, max_length=256)
    priority: Annotated[int, Field(ge=-1000, le=1000)] = 0
    device: JobDevice = Field(
        default="auto",
        description="auto: GPUs for the roles that benefit from one, where the party has them; "
        "cuda: GPUs for every role that can use one (the job waits for them); cpu: CPUs only",
    )
    tags: Tags = Field(default_factory=list)

    @model_validator(mode="after")
    def _options_in_all(self) -> JobCreate:
        total = sum(json_size(a.options) for a in self.assignments)
        if total > MAX_JOB_OPTIONS_BYTES:
            reason = (
                f"the options of all assignments are {total} bytes as JSON, over the limit of "
                f"{MAX_JOB_OPTIONS_BYTES}"
            )
            raise json_problem(JsonProblem("json_too_large", reason, ("assignments",)), None)
        return self


class AssignmentPublic(BaseModel):
    party: str
    role: str
    processes: int
    dataset: str | None
    capacity: list[float] | None
    options: dict[str, Any]


class RankDevicePublic(BaseModel):
    rank: int
    device: str = Field(description="Where the rank runs: cpu or cuda:N")
    role: str | None = Field(default=None, description="The rank's role in the job's plan")
    backend: Literal["gloo", "nccl"] = Field(
        default="gloo",
        description="How the rank talks to the other ranks of its party (ranks of other "
        "parties are reached over the TLS mesh)",
    )


class TaskPublic(BaseModel):
    id: str
    party: str
    worker_id: str
    ranks: list[RankDevicePublic]
    status: str
    reason: str | None
    exit_code: int | None
    failed_rank: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class ResumePoint(BaseModel):
    step: int
    uri: str


class AttemptPublic(BaseModel):
    number: int
    status: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    failure_code: str | None
    failure_reason: str | None
    resume_from: ResumePoint | None
    tasks: list[TaskPublic]


class ApprovalIn(Strict):
    reason: Text2000 = ""


class ApprovalPublic(BaseModel):
    party: str
    decision: Literal["pending", "approved", "rejected"]
    reason: str
    decided_by: str | None = Field(
        description="The party that decided, `policy` when its policy approved, or null"
    )
    decided_at: datetime | None


class JobSummary(BaseModel):
    id: str
    name: str
    algorithm: str
    status: str
    status_reason: str
    priority: int
    device: str = Field(default="auto", description="The device the job asked for")
    tags: list[str] = Field(default_factory=list, description="The job's tags, in their order")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    creator: str
    parties: list[str]
    waiting_for: list[str] = Field(description="Parties that have not approved the job yet")


class JobPublic(JobSummary):
    config: dict[str, Any]
    assignments: list[AssignmentPublic]
    approvals: list[ApprovalPublic]
    attempts: list[AttemptPublic]


class JobTagsIn(Strict):
    tags: Tags = Field(description="The job's new tags, replacing the old ones")


class JobRetry(Strict):
    step: Step | None = Field(
        default=None,
        description="Resume from this checkpoint step; default: the last step every rank saved",
    )


class TransitionPublic(BaseModel):
    entity: str
    entity_id: str
    from_status: str | None
    to_status: str
    reason: str
    created_at: datetime
