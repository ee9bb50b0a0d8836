"""Building blocks of the API's shapes: checked names and texts, bounded JSON, pages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from tessera_api.limits import (
    MAX_CONFIG_BYTES,
    MAX_JSON_DEPTH,
    MAX_OPTIONS_BYTES,
    NAME_PATTERN,
    TEXT_PATTERN,
    JsonProblem,
    check_json,
    control_character,
)
from tessera_ml.spec import StrictModel


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


def json_problem(problem: JsonProblem, value: Any) -> ValidationError:
    """A validation error that reports ``problem`` at its location in ``value``."""
    error = PydanticCustomError(problem.kind, problem.reason.replace("{", "{{").replace("}", "}}"))
    return ValidationError.from_exception_data(
        "json", [InitErrorDetails(type=error, loc=problem.loc, input=value)]
    )


def _bounded_json(max_bytes: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def check(value: dict[str, Any]) -> dict[str, Any]:
        try:
            check_json(value, max_bytes=max_bytes)
        except JsonProblem as problem:
            raise json_problem(problem, value) from None
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
