"""The perturbation z, generated parameter by parameter from a seed and never kept whole.

``PerturbedForward`` evaluates the model at W + sign·εz without touching W: while a module runs,
its own parameters are replaced by freshly formed tensors W ± εz, and put back right after, so
only one module's perturbed weights exist at a time. A linear layer goes further: it forms
W ± εz a block of rows at a time and multiplies each block as soon as it is formed, so neither
z nor the perturbed matrix ever exists whole. ``apply_update`` regenerates the same z to take
the SGD step, again a piece at a time. A processor therefore generates z twice per step
(shared directions), and each pass reads and writes the weights once.

z is either ``gaussian`` (standard normal, as in MeZO) or ``rademacher`` (independent ±1 signs, the
classic SPSA direction; E[z zᵀ] = I as for the Gaussian). On CPU a Gaussian costs one 32-bit draw
of the Mersenne twister and a Box-Muller transform per weight, and comes whole (torch's normal
sampler does not give the same numbers when asked in pieces). A Rademacher sign costs one bit of
a counter-based stream (``signs.py``), the same on any device, so any range of z can be formed
on its own, and on CPU ``W + a·z`` is written in one pass without z ever being stored.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, get_args

import torch
from torch import nn
from torch.nn import functional as F

from tessera_ml.algorithms.zo_pair.seeds import mix
from tessera_ml.algorithms.zo_pair.signs import add_signs
from tessera_ml.algorithms.zo_pair.spec import Distribution

DISTRIBUTIONS: tuple[Distribution, ...] = get_args(Distribution)

PIECE = 1 << 19
"""Elements of z formed at once (2 MiB of float32): a piece is consumed while still in cache."""


@dataclass
class ZSource:
    """Draws z for parameter ``index`` of direction ``seed``; counts what it generated."""

    params: Sequence[nn.Parameter]
    distribution: Distribution = "gaussian"
    generated: int = 0
    piece: int = PIECE
    _generators: dict[torch.device, torch.Generator] = field(default_factory=dict)

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
        """The whole z of one parameter, in a tensor of its own."""
        p = self.params[index]
        if self.distribution == "gaussian":
            return self._gaussian(seed, index).view(p.shape)
        z = torch.empty(p.numel(), dtype=p.dtype, device=p.device)
        return self.combine(z, None, seed, index, 0, 1.0).view(p.shape)

    def whole(self, index: int) -> bool:
        """Whether parameter ``index``'s z comes in a single piece: Gaussian z (torch's normal
        sampler gives other numbers asked in pieces), any z off the CPU (one large product
        beats many small ones on a GPU), and parameters of at most a piece."""
        p = self.params[index]
        return self.distribution == "gaussian" or p.device.type != "cpu" or p.numel() <= self.piece

    def ranges(self, index: int, row: int = 1) -> Iterator[tuple[int, int]]:
        """(offset, count) of parameter ``index``'s pieces, each of whole rows of ``row``."""
        n = self.params[index].numel()
        size = n if self.whole(index) else min(max(self.piece // row, 1) * row, n)
        for offset in range(0, n, max(size, 1)):
            yield offset, min(size, n - offset)

    def combine(
        self,
        out: torch.Tensor,
        base: torch.Tensor | None,
        seed: int,
        index: int,
        start: int,
        alpha: float,
    ) -> torch.Tensor:
        """``out = base + alpha·z[start : start + out.numel()]`` for flat ``out`` and ``base``
        (Rademacher z; ``out`` may be ``base``)."""
        if self.distribution != "rademacher":
            raise ValueError("only Rademacher z can be formed a range at a time")
        self.generated += out.numel()
        return add_signs(out, base, mix(seed, index), start, alpha)

    def perturbed(self, base: torch.Tensor, seed: int, index: int, alpha: float) -> torch.Tensor:
        """A new contiguous tensor ``base + alpha·z`` of parameter ``index``'s shape."""
        if self.distribution == "gaussian":
            z = self.draw(seed, index)
            return torch.add(base, z, alpha=alpha, out=z)
        out = torch.empty(base.numel(), dtype=base.dtype, device=base.device)
        return self.combine(out, base.reshape(-1), seed, index, 0, alpha).view(base.shape)

    def add_to(self, target: torch.Tensor, seed: int, index: int, alpha: float) -> None:
        """``target += alpha · z`` for parameter ``index``, in place."""
        flat = target.view(-1)
        if self.distribution == "gaussian":
            flat.add_(self._gaussian(seed, index), alpha=alpha)
        else:
            self.combine(flat, flat, seed, index, 0, alpha)

    def _gaussian(self, seed: int, index: int) -> torch.Tensor:
        p = self.params[index]
        gen = self._generators.get(p.device)
        if gen is None:
            gen = self._generators[p.device] = torch.Generator(device=p.device)
        gen.manual_seed(mix(seed, index))
        self.generated += p.numel()
        return torch.randn(p.numel(), generator=gen, device=p.device, dtype=p.dtype)

    @property
    def generations(self) -> float:
        """z generated so far, in units of the whole model's parameter count."""
        return self.generated / max(self.total, 1)


def unique_parameters(model: nn.Module) -> list[nn.Parameter]:
    """Trainable parameters in a fixed order (tied weights once)."""
    return [p for p in model.parameters() if p.requires_grad]


class PerturbedForward:
    """Runs ``model`` at W + sign·εz, module by module, leaving W untouched.

    Plain ``nn.Linear`` layers run a blocked forward (rows of W ± εz formed and multiplied a
    piece at a time); any other module that owns trainable parameters gets them swapped for
    perturbed copies by hooks around its call.
    """

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
        self._linears = [m for m in owners if isinstance(m, nn.Linear) and _blockable(m)]
        self._hooked = [m for m in owners if not _blockable(m)]
        self._handles: list[Any] = []

    @contextmanager
    def at(self, seed: int, scale: float) -> Iterator[nn.Module]:
        """Within the block, calling the yielded model evaluates it at W + scale·z(seed)."""
        self.seed, self.scale = seed, scale
        self._handles = [
            h
            for m in self._hooked
            for h in (
                m.register_forward_pre_hook(self._swap_in),
                m.register_forward_hook(self._swap_out),
            )
        ]
        for m in self._linears:
            m.forward = self._blocked_forward(m)  # type: ignore[method-assign]
        try:
            with torch.no_grad():
                yield self.model
        finally:
            for m in self._linears:
                del m.forward
            for h in self._handles:
                h.remove()
            self._handles = []
            self._restore_all()

    def _blocked_forward(self, module: nn.Linear) -> Any:
        def forward(x: torch.Tensor) -> torch.Tensor:
            return self._linear(module, x)

        return forward

    def _linear(self, module: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        weight: torch.Tensor = module.weight
        bias: torch.Tensor | None = module.bias
        out_features, in_features = weight.shape
        source, seed, scale = self.source, self.seed, self.scale
        if bias is not None and bias.requires_grad:
            bias = source.perturbed(bias, seed, source.index(bias), scale)
        index = source.index(weight)
        if source.whole(index):
            return F.linear(x, source.perturbed(weight, seed, index, scale), bias)
        rows_in = x.reshape(-1, in_features).t()
        flat = weight.reshape(-1)
        out_t = torch.empty(out_features, rows_in.shape[1], dtype=x.dtype, device=x.device)
        block: torch.Tensor | None = None
        for offset, count in source.ranges(index, in_features):
            if block is None:
                block = torch.empty(count, dtype=weight.dtype, device=weight.device)
            end = offset + count
            rows = source.combine(block[:count], flat[offset:end], seed, index, offset, scale)
            first = offset // in_features
            out = out_t[first : first + count // in_features]
            if bias is None:
                torch.mm(rows.view(-1, in_features), rows_in, out=out)
            else:
                part = bias[first : first + out.shape[0]].unsqueeze(1)
                torch.addmm(part, rows.view(-1, in_features), rows_in, out=out)
        return out_t.t().reshape(*x.shape[:-1], out_features)

    def _swap_in(self, module: nn.Module, args: Any) -> None:
        saved = {}
        for name, p in _own_trainable(module):
            saved[name] = p
            module._parameters[name] = self._perturbed(p)  # type: ignore[assignment]
        self._saved[id(module)] = {"module": module, "params": saved}

    def _perturbed(self, p: torch.Tensor) -> torch.Tensor:
        return self.source.perturbed(p, self.seed, self.source.index(p), self.scale)

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


def _blockable(module: nn.Module) -> bool:
    """A plain linear layer whose weight is trained: its forward can be formed in row blocks."""
    return (
        type(module) is nn.Linear
        and module.weight.requires_grad
        and not module._forward_hooks
        and not module._forward_pre_hooks
    )


@torch.no_grad()
def apply_update(
    source: ZSource,
    directions: Sequence[tuple[int, float]],
    lr: float,
    weight_decay: float = 0.0,
) -> None:
    """W ← W - lr·(Σ_k c_k z(seed_k) + wd·W) for matrices; biases without decay.

    ``directions`` lists (seed, coefficient); each z is regenerated a piece at a time, so no
    whole-model tensor is ever formed. Element-wise and in a fixed order: bit-reproducible.
    """
    for index, p in enumerate(source.params):
        if weight_decay and p.dim() >= 2:
            p.mul_(1.0 - lr * weight_decay)
        for seed, coefficient in directions:
            if coefficient != 0.0:
                source.add_to(p.data, seed, index, alpha=-lr * coefficient)
