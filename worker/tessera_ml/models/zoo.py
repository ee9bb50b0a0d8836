"""Build ``nn.Module``s from model specs, sizing inputs and outputs from the dataset."""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import nn

from tessera_ml.models.spec import (
    ClickModelSpec,
    CNNSpec,
    CustomSpec,
    MLPSpec,
    parse_model_spec,
)

if TYPE_CHECKING:
    from tessera_ml.data.tabular import Dataset

T = TypeVar("T")
_GLOBAL_GENERATOR = threading.Lock()


def seeded(seed: int, build: Callable[[], T], *, restore: bool = False) -> T:
    """``build()`` right after seeding torch's global generator with ``seed``, under a lock;
    with ``restore``, the generator's state from before is put back afterwards.

    Ranks run as threads of one process (``run_algorithm(in_process=True)``) share that
    generator: without the lock, one rank seeding while another draws its initial weights
    would change them."""
    with _GLOBAL_GENERATOR:
        if not restore:
            torch.manual_seed(seed)
            return build()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return build()


_ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "tanh": nn.Tanh, "gelu": nn.GELU}


def build_model(
    spec: Any,
    *,
    in_features: int | None = None,
    out_features: int | None = None,
    dataset: Dataset | None = None,
) -> nn.Module:
    """The module a spec describes; sizes come from the spec, then arguments, then dataset."""
    parsed = parse_model_spec(spec)
    if dataset is not None:
        in_features = in_features or dataset.num_features
        out_features = out_features or dataset.num_outputs
    if isinstance(parsed, MLPSpec):
        return mlp(
            parsed,
            _need(parsed.in_features or in_features, "in_features"),
            _need(parsed.out_features or out_features, "out_features"),
        )
    if isinstance(parsed, CNNSpec):
        return SmallCNN(parsed, _need(parsed.out_features or out_features, "out_features"))
    if isinstance(parsed, ClickModelSpec):
        fields = parsed.fields or in_features
        ids = parsed.ids_per_field or (dataset.meta.get("ids_per_field") if dataset else None)
        return ClickModel(parsed, _need(fields, "fields"), _need(ids, "ids_per_field"))
    return custom_model(parsed, in_features, out_features)


def mlp(spec: MLPSpec, in_features: int, out_features: int) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = in_features
    for hidden in spec.hidden:
        layers.append(nn.Linear(width, hidden))
        if spec.batch_norm:
            layers.append(nn.BatchNorm1d(hidden))
        layers.append(_ACTIVATIONS[spec.activation]())
        if spec.dropout:
            layers.append(nn.Dropout(spec.dropout))
        width = hidden
    layers.append(nn.Linear(width, out_features))
    return nn.Sequential(*layers)


class SmallCNN(nn.Module):
    """For 8x8 (digits) or 28x28 images; flat rows are reshaped to images."""

    def __init__(self, spec: CNNSpec, out_features: int) -> None:
        super().__init__()
        self.image_shape = (spec.in_channels, spec.image_size, spec.image_size)
        stages: list[nn.Module] = []
        channels, size = spec.in_channels, int(spec.image_size)
        for width in spec.channels:
            stages.append(nn.Conv2d(channels, width, 3, padding=1))
            if spec.batch_norm:
                stages.append(nn.BatchNorm2d(width))
            stages.append(nn.ReLU())
            if size % 2 == 0 and size > 4:
                stages.append(nn.MaxPool2d(2))
                size //= 2
            channels = width
        self.features = nn.Sequential(*stages)
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(channels * size * size, spec.hidden),
            nn.ReLU(),
            nn.Linear(spec.hidden, out_features),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], *self.image_shape)
        out: torch.Tensor = self.head(self.features(x))
        return out


class ClickModel(nn.Module):
    """Per-field embeddings (one shared table, offset by field) and a per-id bias, into an MLP."""

    def __init__(self, spec: ClickModelSpec, fields: int, ids_per_field: int) -> None:
        super().__init__()
        self.ids_per_field = ids_per_field
        self.offsets: torch.Tensor
        self.register_buffer("offsets", torch.arange(fields, dtype=torch.int64) * ids_per_field)
        self.embedding = nn.Embedding(fields * ids_per_field, spec.dim)
        self.bias = nn.Embedding(fields * ids_per_field, 1)
        nn.init.normal_(self.embedding.weight, std=0.05)
        nn.init.zeros_(self.bias.weight)
        self.mlp = mlp(
            MLPSpec(hidden=spec.hidden, batch_norm=spec.batch_norm), fields * spec.dim, 1
        )

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        flat = ids.long() + self.offsets
        vectors = self.embedding(flat).flatten(1)
        wide: torch.Tensor = self.bias(flat).sum(1)
        out: torch.Tensor = self.mlp(vectors) + wide
        return out


def custom_model(spec: CustomSpec, in_features: int | None, out_features: int | None) -> nn.Module:
    module_name, _, attr = spec.target.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"custom model {spec.target!r} is not installed on this worker") from exc
    # the worker allows code by module: a name the module merely imported from elsewhere
    # (``from subprocess import run``, or from a module of its own package that the worker
    # does not allow) is not that module's code; one defined below it is (``torch.nn:Linear``)
    defined_in = getattr(factory, "__module__", None) or "elsewhere"
    if not (inspect.isfunction(factory) or inspect.isclass(factory)) or not (
        defined_in == module_name or defined_in.startswith(module_name + ".")
    ):
        raise ValueError(
            f"custom model {spec.target!r} is not a function or class defined in {module_name} "
            f"(it comes from {defined_in}); name it where it is defined"
        )
    kwargs = dict(spec.kwargs)
    params = inspect.signature(factory).parameters
    for name, value in (("in_features", in_features), ("out_features", out_features)):
        if name in params and name not in kwargs and value is not None:
            kwargs[name] = value
    model = factory(**kwargs)
    if not isinstance(model, nn.Module):
        raise ValueError(
            f"custom model {spec.target!r} returned {type(model).__name__}, not a Module"
        )
    return model


def _need(value: Any, name: str) -> int:
    if value is None:
        raise ValueError(f"the model needs {name}: give it in the spec or build it with a dataset")
    return int(value)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
