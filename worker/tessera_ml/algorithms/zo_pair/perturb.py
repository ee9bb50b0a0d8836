"""The perturbation z, generated parameter by parameter from a seed and never kept whole.

``PerturbedForward`` evaluates the model at W + sign·εz without touching W: while a module runs,
its own parameters are replaced by freshly formed tensors W ± εz, and put back right after, so
only one module's perturbed weights exist at a time. ``apply_update`` regenerates the same z to
take the SGD step. A processor therefore generates z twice per step (shared directions).

z is either ``gaussian`` (standard normal, as in MeZO) or ``rademacher`` (independent ±1 signs, the
classic SPSA direction; E[z zᵀ] = I as for the Gaussian). On CPU a Gaussian costs one 32-bit draw
of the Mersenne twister and a Box-Muller transform per weight; a Rademacher sign costs one bit, so
32 signs come from one draw and are expanded eight at a time through a 256-row table.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, get_args

import torch
from torch import nn

from tessera_ml.algorithms.zo_pair.seeds import mix
from tessera_ml.algorithms.zo_pair.spec import Distribution

DISTRIBUTIONS: tuple[Distribution, ...] = get_args(Distribution)


def _sign_table(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Row b holds the eight signs of byte b: +1 where bit i of b is set, -1 where it is not."""
    bits = (torch.arange(256).unsqueeze(1) >> torch.arange(8)) & 1
    return (bits * 2 - 1).to(dtype=dtype, device=device)


@dataclass
class ZSource:
    """Draws z for parameter ``index`` of direction ``seed``; counts what it generated."""

    params: Sequence[nn.Parameter]
    distribution: Distribution = "gaussian"
    generated: int = 0
    _generators: dict[torch.device, torch.Generator] = field(default_factory=dict)
    _tables: dict[tuple[torch.dtype, torch.device], torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(
                f"distribution must be one of {DISTRIBUTIONS}, not {self.distribution!r}"
            )
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
        if self.distribution == "gaussian":
            return torch.randn(p.shape, generator=gen, device=p.device, dtype=p.dtype)
        return self._signs(p, gen)

    def _signs(self, p: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        key = (p.dtype, p.device)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = _sign_table(p.dtype, p.device)
        words = torch.empty((p.numel() + 31) // 32, dtype=torch.int64, device=p.device)
        words.random_(0, 1 << 32, generator=gen)
        # each word's low 32 bits are random: its four bytes give 32 signs
        octets = words.to(torch.int32).view(torch.uint8).to(torch.int32)
        return table.index_select(0, octets).view(-1)[: p.numel()].view(p.shape)

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
