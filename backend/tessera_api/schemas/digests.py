"""A job in a few numbers, for lists and comparisons (its attempts and final metrics), and when
its steps happened, for charts over wall-clock time."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class FinalValue(BaseModel):
    value: float = Field(description="The series' last reported value")
    step: int = Field(description="The last step the series reached")
    rank: int = Field(description="The lowest rank that reports the metric")


class JobDigest(BaseModel):
    id: str
    attempts: int
    metrics: dict[str, FinalValue] = Field(
        description="Each metric of the latest attempt without a breakdown (no dot in its name)"
    )


class StepTime(BaseModel):
    step: int
    time: datetime = Field(description="When a rank first reported a metric at this step")


class StepTimes(BaseModel):
    attempt: int | None
    points: list[StepTime] = Field(description="By step; evenly thinned to max_points")
