"""The perturbation z, generated parameter by parameter from a seed and never kept whole.

``PerturbedForward`` evaluates the model at W + sign·εz without touching W: while a module runs,
its own parameters are replaced by freshly formed tensors W ± εz, and put back right after, so
only one module's perturbed weights exist at a time. ``apply_update`` regenerates the same z to
take the SGD step. A processor therefore generates z twice per step (shared directions).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from tessera_ml.algorithms.zo_pair.seeds import mix


@dataclass
class ZSource:
    """Draws z for parameter ``index`` of direction ``seed``; counts what it generated."""

    params: Sequence[nn.Parameter]
    generated: int = 0
    _generators: dict[torch.device, torch.Generator] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._index = {id(p): i for i, p in enumerate(self.params)}
        self.total = sum(p.numel() for p in self.params)

    def index(self, param: torch.Tensor) -> int:
        return self._index[id(param)]

    def draw(self, seed: int, index: int) -> torch.Tensor:
        p = self.params[index]
        gen = self._generators.get(p.device)
        if gen is None:
            gen = self._generators[p.device] = torch.Generator(device=p.device)
        gen.manual_seed(mix(seed, index))
        self.generated += p.numel()
        return torch.randn(p.shape, generator=gen, device=p.device, dtype=p.dtype)

    @property
    def generations(self) -> float:
        """z generated so far, in units of the whole model's parameter count."""
        return self.generated / max(self.total, 1)


def unique_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Trainable parameters in a fixed order (tied weights once)."""
    return [p for p in model.parameters() if p.requires_grad]


class PerturbedForward:
    """Hooks that run ``model`` at W + sign·εz, module by module, leaving W untouched."""

    def __init__(self, model: nn.Module, source: ZSource) -> None:
        self.model = model
        self.source = source
        self.seed = 0
        self.scale = 0.0
        self._saved: dict[int, dict[str, Any]] = {}
        owners = [m for m in model.modules() if any(_own_trainable(m))]
        covered = {id(p) for m in owners for _, p in _own_trainable(m)}
        if covered != {id(p) for p in source.params}:
            raise ValueError("every trainable parameter must be registered on a module")
        self._owners = owners
        self._handles: list[Any] = []

    @contextmanager
    def at(self, seed: int, scale: float) -> Iterator[nn.Module]:
        """Within the block, calling the yielded model evaluates it at W + scale·z(seed)."""
        self.seed, self.scale = seed, scale
        self._handles = [
            h
            for m in self._owners
            for h in (
                m.register_forward_pre_hook(self._swap_in),
                m.register_forward_hook(self._swap_out),
            )
        ]
        try:
            with torch.no_grad():
                yield self.model
        finally:
            for h in self._handles:
                h.remove()
            self._handles = []
            self._restore_all()

    def _swap_in(self, module: nn.Module, args: Any) -> None:
        saved = {}
        for name, p in _own_trainable(module):
            z = self.source.draw(self.seed, self.source.index(p))
            saved[name] = p
            perturbed = torch.add(p, z, alpha=self.scale, out=z)
            module._parameters[name] = perturbed  # type: ignore[assignment]
        self._saved[id(module)] = {"module": module, "params": saved}

    def _swap_out(self, module: nn.Module, args: Any, output: Any) -> None:
        entry = self._saved.pop(id(module), None)
        if entry is not None:
            module._parameters.update(entry["params"])

    def _restore_all(self) -> None:
        for entry in self._saved.values():
            entry["module"]._parameters.update(entry["params"])
        self._saved.clear()


def _own_trainable(module: nn.Module) -> list[tuple[str, nn.Parameter]]:
    return [(n, p) for n, p in module._parameters.items() if p is not None and p.requires_grad]


@torch.no_grad()
def apply_update(
    source: ZSource,
    directions: Sequence[tuple[int, float]],
    lr: float,
    weight_decay: float = 0.0,
) -> None:
    """W ← W - lr·(Σ_k c_k z(seed_k) + wd·W) for matrices; biases without decay.

    ``directions`` lists (seed, coefficient); each z is regenerated layer by layer, so no
    whole-model tensor is ever formed. Element-wise and in a fixed order: bit-reproducible.
    """
    for index, p in enumerate(source.params):
        if weight_decay and p.dim() >= 2:
            p.mul_(1.0 - lr * weight_decay)
        for seed, coefficient in directions:
            if coefficient != 0.0:
                p.add_(source.draw(seed, index), alpha=-lr * coefficient)
