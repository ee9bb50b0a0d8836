"""The perturbation path on one process: W untouched, z from seeds, finite differences."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.func import functional_call

from tessera_ml.algorithms.zo_pair.data import PairStream
from tessera_ml.algorithms.zo_pair.model import per_input_loss
from tessera_ml.algorithms.zo_pair.perturb import (
    DISTRIBUTIONS,
    Distribution,
    PerturbedForward,
    ZSource,
    apply_update,
    unique_parameters,
)
from tessera_ml.algorithms.zo_pair.protocol import Schedule
from tessera_ml.bench.zo_pair.mezo import MezoStep
from tessera_ml.models.zoo import build_model


def _model(dtype: torch.dtype = torch.float32) -> nn.Module:
    torch.manual_seed(3)
    return build_model({"kind": "mlp", "hidden": [5, 4], "in_features": 6, "out_features": 3}).to(
        dtype
    )


def _materialised(
    source: ZSource, model: nn.Module, seed: int, scale: float
) -> dict[str, torch.Tensor]:
    names = {id(p): n for n, p in model.named_parameters()}
    return {
        names[id(p)]: p.detach() + scale * source.draw(seed, i) for i, p in enumerate(source.params)
    }


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_perturbed_forward_matches_materialised_weights_and_leaves_w_untouched(
    dist: Distribution,
) -> None:
    model = _model()
    source = ZSource(unique_parameters(model), dist)
    before = [(p.data_ptr(), p.detach().clone()) for p in source.params]
    x = torch.randn(7, 6)
    with PerturbedForward(model, source).at(seed=11, scale=-0.05) as perturbed:
        out = perturbed(x)
    reference = functional_call(model, _materialised(source, model, 11, -0.05), (x,))
    assert torch.allclose(out, reference, rtol=0, atol=1e-6)
    assert not torch.allclose(out, model(x).detach(), atol=1e-3)
    for p, (ptr, value) in zip(source.params, before, strict=True):
        assert p.data_ptr() == ptr and torch.equal(p.detach(), value)
        assert isinstance(p, nn.Parameter)
    assert all(isinstance(v, nn.Parameter) for m in model.modules() for v in m._parameters.values())


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_z_is_a_function_of_seed_and_parameter_only(dist: Distribution) -> None:
    source = ZSource(unique_parameters(_model()), dist)
    assert torch.equal(source.draw(5, 2), source.draw(5, 2))
    assert not torch.equal(source.draw(5, 2), source.draw(6, 2))
    a, b = source.draw(5, 0), source.draw(5, 2)
    assert not torch.equal(a.flatten()[:4], b.flatten()[:4])


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_central_difference_is_the_directional_derivative(dist: Distribution) -> None:
    model = _model(torch.float64)
    source = ZSource(unique_parameters(model), dist)
    forward = PerturbedForward(model, source)
    x, y = torch.randn(2, 8, 6, dtype=torch.float64), torch.randint(0, 3, (2, 8))
    eps = 1e-5

    def losses(sign: float) -> torch.Tensor:
        with forward.at(seed=4, scale=sign * eps) as m:
            return per_input_loss(m(x.view(-1, 6)), y.view(-1), "classification", 2)

    estimate = (losses(1.0) - losses(-1.0)) / (2 * eps)
    for k in range(2):
        model.zero_grad()
        per_input_loss(model(x[k]), y[k], "classification", 1)[0].backward()
        exact = 0.0
        for i, p in enumerate(source.params):
            assert p.grad is not None
            exact += float((p.grad * source.draw(4, i)).sum())
        assert abs(float(estimate[k]) - exact) < 1e-6 * max(1.0, abs(exact))


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_two_z_generations_per_step_and_update_is_minus_lr_g_z(dist: Distribution) -> None:
    model = _model()
    source = ZSource(unique_parameters(model), dist)
    with PerturbedForward(model, source).at(seed=9, scale=0.01) as m:
        m(torch.randn(4, 6))
    assert source.generations == 1.0
    expected = [p.detach() - 0.1 * 0.5 * source.draw(9, i) for i, p in enumerate(source.params)]
    source.generated = 0
    apply_update(source, [(9, 0.5)], lr=0.1)
    assert source.generations == 1.0
    for p, e in zip(source.params, expected, strict=True):
        assert torch.allclose(p.detach(), e, rtol=0, atol=1e-7)


def test_rademacher_z_is_balanced_independent_signs() -> None:
    weight = nn.Parameter(torch.zeros(1000, 257))  # 257 000 signs: not a multiple of 32
    source = ZSource([weight], "rademacher")
    z = source.draw(3, 0)
    assert z.shape == weight.shape and z.dtype == weight.dtype
    assert set(z.unique().tolist()) == {-1.0, 1.0}
    flat = z.flatten()
    n = flat.numel()
    # mean and lag-1 correlation of ±1 signs have standard deviation 1/sqrt(n): allow 5 of them
    assert abs(float(flat.mean())) < 5 / n**0.5
    assert abs(float((flat[1:] * flat[:-1]).mean())) < 5 / n**0.5
    # every bit position within a byte and a 32-bit word carries its own sign
    for stride in (8, 32):
        column_means = flat[: n - n % stride].view(-1, stride).mean(0)
        assert float(column_means.abs().max()) < 5 / (n / stride) ** 0.5
    other = source.draw(4, 0)
    assert abs(float((z * other).mean())) < 5 / n**0.5
    half = ZSource([nn.Parameter(torch.zeros(1000, 257, dtype=torch.float64))], "rademacher")
    assert torch.equal(half.draw(3, 0), z.double())


def test_unknown_distribution_is_refused() -> None:
    with pytest.raises(ValueError, match="distribution"):
        ZSource(unique_parameters(_model()), "uniform")  # type: ignore[arg-type]


def test_weight_decay_shrinks_matrices_only() -> None:
    model = _model()
    source = ZSource(unique_parameters(model))
    before = [p.detach().clone() for p in source.params]
    apply_update(source, [(1, 0.0)], lr=0.1, weight_decay=0.5)
    for p, b in zip(source.params, before, strict=True):
        assert torch.equal(p.detach(), b * 0.95 if p.dim() >= 2 else b)


def test_schedule_warms_up_then_decays_to_zero() -> None:
    cosine = Schedule(1.0, 110, "cosine", warmup_steps=10)
    assert cosine.at(0) == 0.1 and cosine.at(9) == 1.0 and cosine.at(10) == 1.0
    assert abs(cosine.at(110)) < 1e-12 and 0.4 < cosine.at(60) < 0.6
    assert Schedule(2.0, 100, "linear").at(50) == 1.0
    assert Schedule(2.0, 100).at(99) == 2.0


def test_a_pair_reads_every_example_once_per_epoch_in_a_seeded_order() -> None:
    x, y = torch.arange(40.0).view(20, 2), torch.arange(20)
    stream = PairStream(x, y, pair=1, job_seed=3, micro_batch=5)
    epoch = torch.cat([stream.inputs(s)[1].flatten() for s in range(2)])
    assert sorted(epoch.tolist()) == list(range(20))
    again = PairStream(x, y, pair=1, job_seed=3, micro_batch=5).inputs(1)
    assert torch.equal(again[0], stream.inputs(1)[0])
    other = PairStream(x, y, pair=0, job_seed=3, micro_batch=5).inputs(0)[1]
    assert not torch.equal(other, stream.inputs(0)[1])


def test_mezo_baseline_takes_the_same_step_with_four_generations() -> None:
    model, reference = _model(), _model()
    mezo = MezoStep(model, epsilon=1e-3, lr=0.1, task="classification")
    source = ZSource(unique_parameters(reference))
    forward = PerturbedForward(reference, source)
    x, y = torch.randn(2, 4, 6), torch.randint(0, 3, (2, 4))
    sides = []
    for sign in (1.0, -1.0):
        with forward.at(seed=21, scale=sign * 1e-3) as m:
            sides.append(per_input_loss(m(x.flatten(0, 1)), y.flatten(), "classification", 2))
    expected_g = float(((sides[0].double() - sides[1].double()) / 2e-3).mean())
    g = mezo.step(21, x, y)
    assert abs(g - expected_g) < 1e-3 * max(1.0, abs(expected_g))
    assert mezo.source.generations == 4.0
    apply_update(source, [(21, g)], lr=0.1)
    for a, b in zip(model.parameters(), reference.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.parametrize("piece", [32, 96, 1000, 1 << 19])
def test_rademacher_pieces_put_together_are_the_whole_z(piece: int) -> None:
    weight = nn.Parameter(torch.zeros(37, 129))  # 4 773 signs: neither rows nor words divide it
    whole = ZSource([weight], "rademacher").draw(8, 0)
    source = ZSource([weight], "rademacher", piece=piece)
    for row in (1, 129):
        got = torch.empty(weight.numel())
        offsets = []
        for offset, count in source.ranges(0, row):
            z = source.combine(torch.empty(count), None, 8, 0, offset, 1.0)
            assert offset % row == 0 and (z.numel() % row == 0 or offset + z.numel() == 4773)
            got[offset : offset + z.numel()] = z
            offsets.append(offset)
        assert offsets == sorted(offsets) and offsets[0] == 0
        assert len(offsets) > 1 or piece >= 4773
        assert torch.equal(got.view(37, 129), whole)


def test_linear_layers_run_blocked_and_match_the_materialised_weights() -> None:
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(70, 300), nn.ReLU(), nn.Linear(300, 4, bias=False))
    source = ZSource(unique_parameters(model), "rademacher", piece=2048)
    forward = PerturbedForward(model, source)
    x = torch.randn(3, 5, 70)
    with forward.at(seed=2, scale=0.03) as perturbed:
        assert all("forward" in vars(m) for m in model if isinstance(m, nn.Linear))
        out = perturbed(x)
    assert not any("forward" in vars(m) for m in model)
    reference = functional_call(model, _materialised(source, model, 2, 0.03), (x,))
    assert out.shape == (3, 5, 4)
    assert torch.allclose(out, reference, rtol=0, atol=1e-5)
    assert source.generations == 1.0 + 1.0  # the reference drew z once more


def test_z_comes_whole_where_pieces_would_change_it_or_cost_more() -> None:
    cpu = nn.Parameter(torch.zeros(1000))
    meta = nn.Parameter(torch.zeros(1000, device="meta"))
    assert not ZSource([cpu], "rademacher", piece=64).whole(0)
    # torch's normal sampler gives other numbers when asked in pieces
    assert ZSource([cpu], "gaussian", piece=64).whole(0)
    # off the CPU one product of the whole layer beats many small ones
    assert ZSource([meta], "rademacher", piece=64).whole(0)
    assert list(ZSource([cpu], "rademacher", piece=64).ranges(0))[-1] == (960, 40)


def test_an_empty_parameter_draws_an_empty_z() -> None:
    source = ZSource([nn.Parameter(torch.zeros(0, 3))], "rademacher")
    assert source.draw(1, 0).shape == (0, 3)
    assert list(source.ranges(0)) == []
