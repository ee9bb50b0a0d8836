"""Model specifications as JSON-able pydantic models. Importable without torch.

A job's configuration names its model as a JSON object with a ``kind``, or just the kind's
name (``"mlp"``) for the defaults. Input and output sizes may be left out: they are taken
from the dataset when the model is built.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from tessera_ml.spec import CodeTarget, StrictModel

Activation = Literal["relu", "tanh", "gelu"]
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class _Spec(StrictModel):
    model_config = ConfigDict(frozen=True)


class MLPSpec(_Spec):
    """Fully connected layers with an activation after each hidden layer."""

    kind: Literal["mlp"] = "mlp"
    hidden: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [64])
    activation: Activation = "relu"
    batch_norm: bool = Field(default=False, description="BatchNorm1d after each hidden layer")
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    in_features: int | None = Field(default=None, ge=1)
    out_features: int | None = Field(default=None, ge=1)


class CNNSpec(_Spec):
    """Two 3x3 convolutions and a pooling per stage, then a small classifier head."""

    kind: Literal["cnn"] = "cnn"
    image_size: Literal[8, 28] = 8
    in_channels: int = Field(default=1, ge=1)
    channels: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [16, 32])
    hidden: int = Field(default=64, ge=1)
    batch_norm: bool = False
    out_features: int | None = Field(default=None, ge=1)


class ClickModelSpec(_Spec):
    """One embedding per categorical field, concatenated into an MLP; one logit out."""

    kind: Literal["click"] = "click"
    dim: int = Field(default=8, ge=1, description="Embedding width")
    hidden: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [64, 32])
    batch_norm: bool = False
    fields: int | None = Field(default=None, ge=1)
    ids_per_field: int | None = Field(default=None, ge=1)


class CustomSpec(_Spec):
    """``target`` is ``module:callable`` installed on the worker; it returns an ``nn.Module``.

    It is called with ``kwargs``, plus ``in_features`` / ``out_features`` when its signature
    has parameters of those names.
    """

    kind: Literal["custom"] = "custom"
    target: CodeTarget
    kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("target")
    @classmethod
    def _target_form(cls, value: str) -> str:
        if not _TARGET.match(value):
            raise ValueError("target must look like package.module:callable")
        return value


ModelSpec = Annotated[MLPSpec | CNNSpec | ClickModelSpec | CustomSpec, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[MLPSpec | CNNSpec | ClickModelSpec | CustomSpec] = TypeAdapter(ModelSpec)
KINDS = ("mlp", "cnn", "click", "custom")


def parse_model_spec(
    raw: str | dict[str, Any] | BaseModel,
) -> MLPSpec | CNNSpec | ClickModelSpec | CustomSpec:
    """A spec from JSON, a kind name, or a spec object; raises ``ValueError``."""
    if isinstance(raw, MLPSpec | CNNSpec | ClickModelSpec | CustomSpec):
        return raw
    if isinstance(raw, str):
        if raw not in KINDS or raw == "custom":
            if ":" in raw:
                return CustomSpec(target=raw)
            raise ValueError(
                f"unknown model kind {raw!r} (known: mlp, cnn, click, or module:callable)"
            )
        raw = {"kind": raw}
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    return _ADAPTER.validate_python(raw)
