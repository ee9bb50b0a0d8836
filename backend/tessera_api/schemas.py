"""Request and response shapes of the REST API, named by purpose (``JobCreate``, ``JobPublic``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from tessera_api.limits import (
    MAX_CONFIG_BYTES,
    MAX_JOB_OPTIONS_BYTES,
    MAX_JSON_DEPTH,
    MAX_OPTIONS_BYTES,
    NAME_PATTERN,
    TEXT_PATTERN,
    JsonProblem,
    check_json,
    control_character,
    json_size,
)
from tessera_ml.spec import Assignment, StrictModel, integral_numbers


def _name(value: str) -> str:
    if (reason := control_character(value)) is not None:
        raise PydanticCustomError("control_character", reason)
    return value


def _text(value: str) -> str:
    if (reason := control_character(value, nul_only=True)) is not None:
        raise PydanticCustomError("control_character", reason)
    return value


NameCheck = AfterValidator(_name)
"""Refuses control characters in a name, with the reason (the pattern documents it)."""
TextCheck = AfterValidator(_text)
AS_NAME: dict[str, Any] = {"pattern": NAME_PATTERN}
AS_TEXT: dict[str, Any] = {"pattern": TEXT_PATTERN}


def _json_problem(problem: JsonProblem, value: Any) -> ValidationError:
    error = PydanticCustomError(problem.kind, problem.reason.replace("{", "{{").replace("}", "}}"))
    return ValidationError.from_exception_data(
        "json", [InitErrorDetails(type=error, loc=problem.loc, input=value)]
    )


def _bounded_json(max_bytes: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def check(value: dict[str, Any]) -> dict[str, Any]:
        try:
            check_json(value, max_bytes=max_bytes)
        except JsonProblem as problem:
            raise _json_problem(problem, value) from None
        return value

    return check


MAX_INT = 2**53
"""The largest integer a client in JavaScript reads exactly."""
Slug = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,62}$", description="Lower-case slug")]
Step = Annotated[int, Field(ge=0, le=MAX_INT)]
Rank = Annotated[int, Field(ge=0, le=65535)]
Id = Annotated[str, Field(max_length=64, json_schema_extra=AS_NAME), NameCheck]
MetricName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:/-]{1,128}$")]
Text200 = Annotated[str, Field(min_length=1, max_length=200, json_schema_extra=AS_NAME), NameCheck]
"""A human-readable name: no control characters."""
Name63 = Annotated[str, Field(max_length=63, json_schema_extra=AS_NAME), NameCheck]
Name200 = Annotated[str, Field(max_length=200, json_schema_extra=AS_NAME), NameCheck]
Host = Annotated[str, Field(min_length=1, max_length=255, json_schema_extra=AS_NAME), NameCheck]
Address = Annotated[str, Field(max_length=255, json_schema_extra=AS_NAME), NameCheck]
Version64 = Annotated[str, Field(max_length=64, json_schema_extra=AS_NAME), NameCheck]
Text2000 = Annotated[str, Field(max_length=2000, json_schema_extra=AS_TEXT), TextCheck]
"""Free text: anything but NUL."""
Text4000 = Annotated[str, Field(max_length=4000, json_schema_extra=AS_TEXT), TextCheck]
ConfigJson = Annotated[
    dict[str, Any],
    Field(
        description=f"The algorithm's configuration; at most {MAX_CONFIG_BYTES} bytes as JSON, "
        f"nested at most {MAX_JSON_DEPTH} levels, finite numbers only"
    ),
    AfterValidator(_bounded_json(MAX_CONFIG_BYTES)),
]
OptionsJson = Annotated[
    dict[str, Any],
    Field(
        description=f"Algorithm-specific per-assignment options; at most {MAX_OPTIONS_BYTES} "
        f"bytes as JSON, nested at most {MAX_JSON_DEPTH} levels, finite numbers only"
    ),
    AfterValidator(_bounded_json(MAX_OPTIONS_BYTES)),
]


class Strict(StrictModel):
    """A request body: no unknown keys, finite numbers, and no coercion (``"100"`` is not a
    number, ``1`` is not a boolean; ``100.0`` is an integer, as in JSON Schema)."""


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    data: list[T]
    count: int = Field(description="Total matching items, before pagination")


# algorithms


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


# parties


class PartyCreate(Strict):
    name: Annotated[Slug, Field(json_schema_extra={"not": {"const": "admin"}})] = Field(
        description="Lower-case slug; not `admin`, which names the admin in policies"
    )
    display_name: Text200 | None = None
    description: Text2000 = ""


class PartyUpdate(Strict):
    display_name: Text200 | None = None
    description: Text2000 | None = None
    disabled: bool | None = None


class PartyPublic(BaseModel):
    id: str
    name: str
    display_name: str
    description: str
    created_at: datetime
    disabled: bool


class PartyCreated(PartyPublic):
    token: str = Field(description="The party's API token; shown only once")


class PartyPolicy(Strict):
    """What a party consents to without being asked, and what its workers may run."""

    auto_approve_from: list[Slug] = Field(
        max_length=1000,
        description="Parties (or `admin`) whose jobs this party approves without being asked",
    )
    algorithms: list[Name63] | None = Field(
        max_length=1000,
        description="Algorithms this party's workers run; null: every algorithm shipped",
    )
    custom_code: bool = Field(
        description="Whether this party runs jobs whose configuration imports code by name "
        "(a custom model); its workers also need the code on their --allow-custom list"
    )


# workers


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


# jobs


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


class JobCreate(Strict):
    name: Text200
    algorithm: Name63
    config: ConfigJson = Field(default_factory=dict)
    assignments: list[AssignmentIn] = Field(min_length=1, max_length=256)
    priority: Annotated[int, Field(ge=-1000, le=1000)] = 0

    @model_validator(mode="after")
    def _options_in_all(self) -> JobCreate:
        total = sum(json_size(a.options) for a in self.assignments)
        if total > MAX_JOB_OPTIONS_BYTES:
            reason = (
                f"the options of all assignments are {total} bytes as JSON, over the limit of "
                f"{MAX_JOB_OPTIONS_BYTES}"
            )
            raise _json_problem(JsonProblem("json_too_large", reason, ("assignments",)), None)
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
    device: str
    role: str | None = Field(default=None, description="The rank's role in the job's plan")


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


# tasks (worker protocol)


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


# metrics, logs, checkpoints


class MetricPointIn(Strict):
    rank: Rank
    name: MetricName
    step: Step
    value: float
    time: datetime | None = Field(default=None, strict=False)

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        # run for each of up to 10,000 points a batch: only its integer fields are looked at
        if isinstance(data, dict) and (
            type(data.get("rank")) is float or type(data.get("step")) is float
        ):
            return integral_numbers(data)
        return data


class MetricBatch(Strict):
    task_id: Id
    points: list[MetricPointIn] = Field(max_length=10_000)


class SeriesPoint(BaseModel):
    step: int = Field(
        description="The last step of the bucket (the step itself when not downsampled)"
    )
    value: float = Field(description="Mean of the bucket")
    min: float
    max: float
    count: int


class Series(BaseModel):
    name: str
    rank: int
    downsampled: bool
    points: list[SeriesPoint]


class MetricsPublic(BaseModel):
    attempt: int | None
    series: list[Series]


class LogLineIn(Strict):
    rank: Rank
    level: Literal["debug", "info", "warning", "error", "critical"] = "info"
    message: Annotated[str, Field(max_length=16_000, json_schema_extra=AS_TEXT), TextCheck]
    time: datetime | None = Field(default=None, strict=False)


class LogBatch(Strict):
    task_id: Id
    lines: list[LogLineIn] = Field(max_length=10_000)


class LogLinePublic(BaseModel):
    id: int
    task_id: str
    rank: int
    level: str
    message: str
    time: datetime


class LogsPublic(BaseModel):
    data: list[LogLinePublic]
    next_cursor: int = Field(description="Pass as `after` to read the following lines")


class CheckpointIn(Strict):
    task_id: Id
    rank: Rank
    step: Step
    uri: Annotated[str, Field(min_length=1, max_length=2048, json_schema_extra=AS_NAME), NameCheck]
    size: Annotated[int, Field(ge=0, le=MAX_INT)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class CheckpointPublic(BaseModel):
    attempt: int
    rank: int
    step: int
    uri: str
    size: int
    sha256: str
    created_at: datetime


# meta


class Health(BaseModel):
    status: Literal["ok"]


class Me(BaseModel):
    name: str = Field(description="``admin``, or the party's slug name")
    is_admin: bool


class Version(BaseModel):
    version: str
    api: str
    algorithms: list[str]
