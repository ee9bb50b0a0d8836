"""Algorithm metadata: roles, configuration schema and the rank plan.

This module is importable without torch: the control plane uses it to validate jobs and to
publish each algorithm's JSON Schema. Everything that runs tensors lives elsewhere.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tessera_ml.errors import CodedError

SLUG = re.compile(r"^[a-z][a-z0-9-]{0,62}$")


def integral_numbers(data: Any) -> Any:
    """An object's fields with each number that has no fractional part (``100.0``) as an int.

    JSON Schema's ``integer`` is any number without a fractional part, so ``100.0`` is a valid
    ``steps``; strict validation would refuse it as a float. Nested objects are left to their
    own model; lists of numbers are converted too.
    """
    if not isinstance(data, dict):
        return data
    return {key: _integral(value) for key, value in data.items()}


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [int(v) if isinstance(v, float) and v.is_integer() else v for v in value]
    return value


class StrictModel(BaseModel):
    """Values as JSON types them, with no coercion: a number field takes a JSON number (an
    ``integer`` one without a fractional part, ``100`` or ``100.0``), never ``"100"`` or
    ``true``; a boolean takes ``true`` or ``false``, never ``1``; numbers are finite; unknown
    keys are an error, not ignored."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        return integral_numbers(data)


class ImportsCode:
    """Marks a configuration field whose value names code a worker would import
    (``module:callable``): a job that sets one needs every party's consent to custom code."""

    def __repr__(self) -> str:
        return "ImportsCode()"


IMPORTS_CODE = ImportsCode()
CodeTarget = Annotated[str, IMPORTS_CODE]


def code_targets(
    value: Any, loc: tuple[str | int, ...] = ()
) -> list[tuple[tuple[str | int, ...], str]]:
    """Every ``(location, target)`` in a validated configuration that names code to import."""
    found: list[tuple[tuple[str | int, ...], str]] = []
    if isinstance(value, BaseModel):
        for name, info in type(value).model_fields.items():
            item = getattr(value, name)
            if any(isinstance(m, ImportsCode) for m in info.metadata):
                if item is not None:
                    found.append(((*loc, name), str(item)))
            else:
                found += code_targets(item, (*loc, name))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found += code_targets(item, (*loc, i))
    elif isinstance(value, dict):
        for key, item in value.items():
            found += code_targets(item, (*loc, str(key)))
    return found


class PlanError(CodedError):
    """A job's role assignments or configuration cannot be turned into a rank plan.

    ``loc`` is the path of the offending field in the job-creation request, e.g.
    ``("assignments", 2, "processes")`` or ``("config", "slicing")``.
    """

    def __init__(self, code: str, reason: str, loc: Sequence[str | int] = ()) -> None:
        super().__init__(code, reason)
        self.loc = tuple(loc)


Device = Literal["cpu", "cuda"]
JobDevice = Literal["auto", "cpu", "cuda"]

ALL_METRICS = ("*",)
OPERATIONAL_METRICS = (
    "step_time_s",
    "step_cpu_s",
    "throughput",
    "progress",
    "bytes_*",
    "link_bytes_sent",
    "state_bytes",
    "optimizer_state_bytes",
    "cpu_*",
    "memory_*",
    "gpu_*",
)
"""How fast and how heavily ranks run: nothing about the data or the model's results."""


def sees_metric(patterns: Sequence[str], name: str) -> bool:
    """Whether a metric ``name`` is among ``patterns`` (shell-style: ``bytes_*``)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


class RoleSpec(BaseModel):
    """A role of an algorithm with how many parties may play it (``max`` None: unbounded) and
    how many processes one party may run for it (``max_processes`` None: up to the limit of
    an assignment).

    The device contract: ``devices`` are where the role's ranks can run, ``gpu_benefit`` says
    whether a GPU makes it faster (a job with ``device: auto`` then asks for one), and
    ``device_note`` tells users why a role runs where it does. Within a party, ranks on GPUs
    talk over NCCL and ranks on CPUs over gloo; between parties every rank talks over the
    TLS mesh, whatever its device.

    ``sees_metrics`` are the metric names (shell-style patterns) a party playing the role may
    read from other parties' ranks, through the API, the event stream and the dashboard; a
    party always sees what its own ranks report. Roles that may not learn the model's results
    (a loss computed from another party's labels) see ``OPERATIONAL_METRICS`` only, and then
    not other parties' logs either, whose progress lines carry those results.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    min: int = Field(ge=0)
    max: int | None = None
    description: str = ""
    max_processes: int | None = Field(default=None, ge=1)
    devices: tuple[Device, ...] = ("cpu",)
    gpu_benefit: bool = False
    device_note: str = ""
    sees_metrics: tuple[str, ...] = ALL_METRICS

    @property
    def sees_all_metrics(self) -> bool:
        return "*" in self.sees_metrics

    @model_validator(mode="after")
    def _coherent_devices(self) -> RoleSpec:
        if not self.devices or len(set(self.devices)) != len(self.devices):
            raise ValueError(f"role {self.name!r}: devices must be distinct and not empty")
        if self.gpu_benefit and "cuda" not in self.devices:
            raise ValueError(f"role {self.name!r} benefits from a GPU it cannot use")
        return self

    @property
    def can_use_gpu(self) -> bool:
        return "cuda" in self.devices


class Assignment(BaseModel):
    """One party playing one role in a job, with its per-assignment options."""

    model_config = ConfigDict(extra="forbid")

    party: str = Field(description="Slug name of the party")
    role: str = Field(description="Role name from the algorithm's role table")
    processes: int = Field(default=1, ge=1, le=64, description="Ranks this party runs for the role")
    dataset: str | None = Field(
        default=None,
        max_length=1024,
        description="Party-local dataset reference, resolved on the party's worker",
    )
    capacity: list[float] | None = Field(
        default=None,
        description="Relative capacity hint per process (e.g. free memory share)",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="Algorithm-specific per-assignment options"
    )


class RankSlot(BaseModel):
    """One rank of the plan: who runs it and in which role."""

    model_config = ConfigDict(frozen=True)

    rank: int
    party: str
    role: str
    role_rank: int = Field(description="Index of this rank among the ranks of its role")
    assignment_index: int
    local_index: int = Field(description="Index of this rank among its assignment's processes")
    dataset: str | None = None
    capacity: float | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class AlgorithmConfig(StrictModel):
    """Base of every algorithm's configuration: unknown keys are an error, not ignored, and
    values are not coerced (``StrictModel``; a nested model derives from it too)."""

    seed: int = Field(default=0, ge=0, description="Seed for initialisation and data order")


@dataclass(frozen=True)
class AlgorithmSpec:
    """What the platform knows about an algorithm without importing torch.

    ``entry_point`` is ``"module:function"``; the function takes a ``RankContext`` and runs one
    rank. Subclasses add algorithm-specific checks by overriding ``check`` and may override
    ``plan`` to order ranks differently.
    """

    name: str
    title: str
    summary: str
    roles: tuple[RoleSpec, ...]
    config_model: type[AlgorithmConfig]
    entry_point: str
    metrics: tuple[str, ...] = field(default=())
    one_device_type: bool = False
    """Every rank must run on the same kind of device (e.g. ranks that draw the same random
    numbers from a shared seed: CPU and CUDA generators differ)."""

    def role(self, name: str) -> RoleSpec | None:
        return next((r for r in self.roles if r.name == name), None)

    def parse_config(self, raw: dict[str, Any] | None) -> AlgorithmConfig:
        """Validate a configuration; raises ``pydantic.ValidationError``."""
        return self.config_model.model_validate(raw or {})

    def validate_assignments(self, assignments: Sequence[Assignment]) -> None:
        """Role names, (party, role) uniqueness and role cardinality."""
        seen: set[tuple[str, str]] = set()
        for i, a in enumerate(assignments):
            role = self.role(a.role)
            if role is None:
                known = ", ".join(r.name for r in self.roles)
                raise PlanError(
                    "unknown_role",
                    f"{self.name} has no role {a.role!r} (roles: {known})",
                    ("assignments", i, "role"),
                )
            if (a.party, a.role) in seen:
                raise PlanError(
                    "duplicate_assignment",
                    f"party {a.party!r} is assigned to role {a.role!r} twice",
                    ("assignments", i),
                )
            seen.add((a.party, a.role))
            most = role.max_processes
            if most is not None and a.processes > most:
                raise PlanError(
                    "too_many_processes",
                    f"a party runs at most {most} process{'es' if most > 1 else ''} for role "
                    f"{a.role!r}, {a.party!r} asks for {a.processes}",
                    ("assignments", i, "processes"),
                )
            if a.capacity is not None and len(a.capacity) != a.processes:
                raise PlanError(
                    "capacity_length",
                    f"capacity has {len(a.capacity)} entries for {a.processes} processes",
                    ("assignments", i, "capacity"),
                )
            if a.capacity is not None and any(c <= 0 for c in a.capacity):
                raise PlanError(
                    "capacity_value", "capacities must be positive", ("assignments", i, "capacity")
                )
        counts = Counter(a.role for a in assignments)
        for r in self.roles:
            n = counts.get(r.name, 0)
            if n < r.min or (r.max is not None and n > r.max):
                bound = f"exactly {r.min}" if r.max == r.min else _range_text(r.min, r.max)
                raise PlanError(
                    "role_cardinality",
                    f"role {r.name!r} needs {bound} part{'y' if r.max == 1 else 'ies'}, got {n}",
                    ("assignments",),
                )

    def plan(self, assignments: Sequence[Assignment], config: AlgorithmConfig) -> list[RankSlot]:
        """Ranks in role-table order, then assignment order, then process order."""
        slots: list[RankSlot] = []
        for role in self.roles:
            role_rank = 0
            for i, a in enumerate(assignments):
                if a.role != role.name:
                    continue
                for p in range(a.processes):
                    slots.append(
                        RankSlot(
                            rank=len(slots),
                            party=a.party,
                            role=a.role,
                            role_rank=role_rank,
                            assignment_index=i,
                            local_index=p,
                            dataset=a.dataset,
                            capacity=a.capacity[p] if a.capacity else None,
                            options=dict(a.options),
                        )
                    )
                    role_rank += 1
        return slots

    def code_targets(self, config: AlgorithmConfig) -> list[tuple[tuple[str | int, ...], str]]:
        """The code this configuration makes a worker import, with where it is named."""
        return code_targets(config, ("config",))

    def check(
        self, assignments: Sequence[Assignment], config: AlgorithmConfig, slots: list[RankSlot]
    ) -> None:
        """Algorithm-specific rules over the whole plan; raise ``PlanError``."""

    def make_plan(
        self, assignments: Sequence[Assignment], config: AlgorithmConfig
    ) -> list[RankSlot]:
        """Validate and plan in one call: what the control plane uses."""
        self.validate_assignments(assignments)
        slots = self.plan(assignments, config)
        self.check(assignments, config, slots)
        return slots

    def describe(self) -> dict[str, Any]:
        """The JSON the control plane serves for ``/algorithms/{name}``."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.summary,
            "roles": [r.model_dump() for r in self.roles],
            "config_schema": config_schema(self.config_model),
            "metrics": list(self.metrics),
            "one_device_type": self.one_device_type,
        }


@functools.cache
def _schema_json(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema())


def config_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON Schema, built once per model (building it takes milliseconds); each
    caller gets its own copy."""
    loaded: dict[str, Any] = json.loads(_schema_json(model))
    return loaded


def _range_text(lo: int, hi: int | None) -> str:
    if hi is None:
        return f"at least {lo}"
    if lo == 0:
        return f"at most {hi}"
    return f"between {lo} and {hi}"
