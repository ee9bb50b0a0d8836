"""What ranks report and the API shows back: metrics, logs and checkpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from tessera_api.schemas.common import (
    AS_NAME,
    AS_TEXT,
    MAX_INT,
    Id,
    MetricName,
    NameCheck,
    Rank,
    Step,
    Strict,
    TextCheck,
)
from tessera_ml.spec import integral_numbers


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


ArtifactKind = Annotated[
    Literal["checkpoint", "export", "model"],
    Field(
        description="checkpoint: a rank's state at a step (a retry resumes from these); export: "
        "a table exported at the end of a run; model: a model revealed to the rank's party"
    ),
]


class CheckpointIn(Strict):
    task_id: Id
    rank: Rank
    step: Step
    uri: Annotated[str, Field(min_length=1, max_length=2048, json_schema_extra=AS_NAME), NameCheck]
    size: Annotated[int, Field(ge=0, le=MAX_INT)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    kind: ArtifactKind = "checkpoint"


class CheckpointPublic(BaseModel):
    attempt: int
    rank: int
    step: int
    uri: str
    size: int
    sha256: str
    created_at: datetime
    kind: ArtifactKind
    party: str = Field(description="The party whose rank wrote it")
    shared: bool = Field(
        description="Whether its worker shared the file with the control plane, so that party "
        "(and the admin) can download it"
    )
