"""The data-parallel algorithms' optimizers: fused where torch has the kernel, with the updates
of torch's plain implementation."""

from __future__ import annotations

import io
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from tessera_ml.comm.base import Communicator
from tessera_ml.training.pieces import fused, make_optimizer
from tessera_ml.worlds import run_world

PLAIN = {
    "sgd": lambda ps, lr: torch.optim.SGD(ps, lr=lr, momentum=0.9, fused=False, foreach=False),
    "adam": lambda ps, lr: torch.optim.Adam(ps, lr=lr, fused=False, foreach=False),
    "adamw": lambda ps, lr: torch.optim.AdamW(
        ps, lr=lr, weight_decay=0.0, fused=False, foreach=False
    ),
}


def settings(name: str) -> SimpleNamespace:
    return SimpleNamespace(optimizer=name, lr=0.01, momentum=0.9)


def three_steps(optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor]) -> None:
    for step in range(3):
        for i, p in enumerate(params):
            p.grad = torch.full_like(p, 0.1 * (step + 1)) * (i + 1) - p.detach()
        optimizer.step()


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_cpu_parameters_take_the_fused_kernel_and_update_as_the_plain_one(name: str) -> None:
    torch.manual_seed(0)
    start = [torch.randn(7, 5), torch.randn(5)]
    mine = [nn.Parameter(t.clone()) for t in start]
    theirs = [nn.Parameter(t.clone()) for t in start]
    optimizer = make_optimizer(settings(name), mine)
    assert optimizer.defaults["fused"] is True
    three_steps(optimizer, mine)
    three_steps(PLAIN[name](theirs, 0.01), theirs)
    for a, b in zip(mine, theirs, strict=True):
        assert not torch.equal(a, start[0] if a.dim() == 2 else start[1])
        assert torch.allclose(a, b, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_a_checkpoint_from_the_plain_kernel_resumes_on_the_fused_one(name: str) -> None:
    """A checkpoint saved before optimizers were fused carries ``fused: None``; loading it
    keeps the kernel this code builds, and the updates go on as the plain optimizer's."""
    torch.manual_seed(0)
    start = [torch.randn(7, 5), torch.randn(5)]
    before = [nn.Parameter(t.clone()) for t in start]
    old = PLAIN[name](before, 0.01)
    three_steps(old, before)
    file = io.BytesIO()
    torch.save(old.state_dict(), file)
    file.seek(0)
    saved = torch.load(file)
    assert saved["param_groups"][0]["fused"] in (None, False)

    mine = [nn.Parameter(p.detach().clone()) for p in before]
    resumed = make_optimizer(settings(name), mine)
    resumed.load_state_dict(saved)
    assert [g["fused"] for g in resumed.param_groups] == [True]
    three_steps(resumed, mine)
    three_steps(old, before)
    for a, b in zip(mine, before, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=0)


def test_only_floating_point_parameters_on_one_kernel_device_are_fused() -> None:
    assert fused([torch.zeros(2), torch.zeros(3, dtype=torch.float64)])
    assert not fused([torch.zeros(2, device="meta")])
    assert not fused([torch.zeros(2), torch.zeros(2, device="meta")])
    assert not fused([torch.zeros(2, dtype=torch.int64)])


def _sharded_steps(comm: Communicator) -> dict[str, Any]:
    """On a two-rank gloo world: every optimizer over parameters sharded by rows (DTensor)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (2,))
    out: dict[str, Any] = {}
    for name in sorted(PLAIN):
        torch.manual_seed(0)
        full = torch.randn(6, 4)
        param = nn.Parameter(distribute_tensor(full.clone(), mesh, [Shard(0)]))
        optimizer = make_optimizer(settings(name), [param])
        for step in range(3):
            grad = torch.full_like(full, 0.1 * (step + 1)) - full
            param.grad = distribute_tensor(grad, mesh, [Shard(0)])
            optimizer.step()
        out[name] = {
            "fused": optimizer.defaults["fused"],
            "local": local_values(param),
        }
    return out


def local_values(param: nn.Parameter) -> list[list[float]]:
    """This rank's shard, as lists (a tensor would leave the rank as a shared storage)."""
    local: torch.Tensor = param.to_local()  # type: ignore[attr-defined]
    return local.detach().tolist()


def test_sharded_parameters_are_fused_where_torch_shards_the_kernel() -> None:
    results = run_world(_sharded_steps, 2)
    for name, plain in PLAIN.items():
        torch.manual_seed(0)
        full = nn.Parameter(torch.randn(6, 4))
        start = full.detach().clone()
        optimizer = plain([full], 0.01)
        for step in range(3):
            full.grad = torch.full_like(start, 0.1 * (step + 1)) - start
            optimizer.step()
        # Adam and AdamW have sharded fused kernels; SGD's fused kernel has no DTensor rule
        assert [r[name]["fused"] for r in results] == [name != "sgd"] * 2
        for rank, r in enumerate(results):
            expected = full.detach()[3 * rank : 3 * rank + 3]
            assert torch.allclose(torch.tensor(r[name]["local"]), expected, atol=1e-6, rtol=0)
