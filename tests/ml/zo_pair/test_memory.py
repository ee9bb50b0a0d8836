"""Peak step memory from the profiler's allocation events."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from tessera_ml.algorithms.zo_pair.perturb import PerturbedForward, ZSource, unique_parameters
from tessera_ml.bench.zo_pair.memory import peak_step_bytes, tensor_bytes
from tessera_ml.models.zoo import build_model

CPU = torch.device("cpu")


def test_peak_counts_what_is_alive_together_on_top_of_the_resident_bytes() -> None:
    def step() -> None:
        a = torch.ones(1 << 18)  # 1 MiB
        b = torch.ones(1 << 19)  # 2 MiB, while a is alive
        del a, b
        c = torch.ones(1 << 19)  # 2 MiB, alone
        del c

    peak = peak_step_bytes(step, resident=1000, device=CPU)
    assert 1000 + 3 * (1 << 20) <= peak < 1000 + 3 * (1 << 20) + (1 << 16)


def test_forward_only_step_needs_a_fraction_of_a_backprop_step() -> None:
    torch.manual_seed(0)
    spec = {"kind": "mlp", "hidden": [128] * 6, "in_features": 32, "out_features": 10}
    model = build_model(spec).eval()
    x, y = torch.randn(1024, 32), torch.randint(0, 10, (1024,))
    params = list(model.parameters())
    forward = PerturbedForward(model, ZSource(unique_parameters(model)))

    def perturbed() -> None:
        with forward.at(seed=1, scale=1e-3) as m:
            F.cross_entropy(m(x), y)

    def backprop() -> None:
        model.zero_grad(set_to_none=False)
        F.cross_entropy(model(x), y).backward()

    backprop()
    zo = peak_step_bytes(perturbed, resident=tensor_bytes([*params, x, y]), device=CPU)
    grads = [p.grad for p in params]
    bp = peak_step_bytes(backprop, resident=tensor_bytes([*params, *grads, x, y]), device=CPU)
    assert zo < bp / 3
