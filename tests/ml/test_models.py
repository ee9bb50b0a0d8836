"""The model zoo: specs from JSON, sizes from the dataset, the custom hook."""

from __future__ import annotations

import re
from os import makedirs  # noqa: F401 (named by a job below: imported here, not defined here)
from pathlib import Path

import pytest
import torch
from torch import nn

from tessera_ml.data import resolve
from tessera_ml.models import build_model, count_parameters, parse_model_spec

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_linear(in_features: int, out_features: int, scale: float = 1.0) -> nn.Module:
    layer = nn.Linear(in_features, out_features)
    nn.init.constant_(layer.weight, scale)
    return layer


@pytest.mark.parametrize(
    "spec",
    [
        "mlp",
        {"kind": "mlp", "hidden": [32, 16], "batch_norm": True, "activation": "tanh"},
        "cnn",
        {"kind": "cnn", "channels": [8], "batch_norm": True},
    ],
)
def test_digits_models_learn_a_few_steps(spec: object) -> None:
    torch.manual_seed(0)
    data = resolve("sklearn:digits")
    model = build_model(spec, dataset=data)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = data.train.x[:256], data.train.y
    assert y is not None
    losses = []
    for _ in range(30):
        loss = nn.functional.cross_entropy(model(x), y[:256])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_cnn_for_28x28_and_click_model_shapes() -> None:
    cnn = build_model({"kind": "cnn", "image_size": 28}, out_features=10)
    assert cnn(torch.randn(2, 784)).shape == (2, 10)
    clicks = resolve("generated:clicks?rows=500&ids=30&fields=3")
    model = build_model({"kind": "click", "dim": 4, "hidden": [8]}, dataset=clicks)
    assert model(clicks.train.x[:7]).shape == (7, 1)
    assert count_parameters(model) == 3 * 30 * 5 + (12 * 8 + 8) + (8 + 1)


def test_custom_hook_receives_sizes_and_kwargs() -> None:
    model = build_model(
        {"kind": "custom", "target": f"{__name__}:tiny_linear", "kwargs": {"scale": 0.5}},
        in_features=3,
        out_features=2,
    )
    assert isinstance(model, nn.Linear) and model.weight.shape == (2, 3)
    assert torch.all(model.weight == 0.5)
    assert isinstance(build_model("torch.nn:Identity"), nn.Identity)
    with pytest.raises(ValueError, match="not installed"):
        build_model("no_such_module:factory")


def test_a_custom_model_is_code_of_the_module_it_names(tmp_path: Path) -> None:
    """A name the module only imported (here ``os.makedirs``) is refused before it is called:
    a worker that allows this module does not allow everything it imports, not even what it
    imports from a module of its own package; what a module below it defines is its code."""
    made = tmp_path / "made"
    refused = f"not a function or class defined in {re.escape(__name__)} "
    with pytest.raises(ValueError, match=refused):
        build_model(
            {"kind": "custom", "target": f"{__name__}:makedirs", "kwargs": {"name": str(made)}}
        )
    assert not made.exists()
    # torch.nn.modules.linear imports Module from its sibling torch.nn.modules.module
    with pytest.raises(ValueError, match=r"comes from torch\.nn\.modules\.module\)"):
        build_model("torch.nn.modules.linear:Module")
    assert isinstance(build_model("torch.nn.modules:Identity"), nn.Identity)


def test_bad_specs_are_value_errors() -> None:
    for bad in ["resnet", {"kind": "mlp", "hidden": [0]}, {"kind": "mlp", "colour": 1}]:
        with pytest.raises(ValueError):
            parse_model_spec(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="in_features"):
        build_model("mlp", out_features=2)


def test_seeded_models_are_the_same_when_ranks_are_threads_of_one_process() -> None:
    """Threads seeding and drawing from torch's shared generator at once each get the weights
    their seed gives alone; with ``restore`` the generator is left as it was."""
    import threading

    from tessera_ml.models.zoo import seeded

    def build() -> nn.Module:
        return build_model({"kind": "mlp", "hidden": [256, 256]}, in_features=64, out_features=10)

    alone = seeded(3, build).state_dict()
    start = threading.Barrier(8)
    built: list[dict[str, torch.Tensor]] = []

    def rank(i: int) -> None:
        start.wait()
        for _ in range(5):
            model = seeded(3, build, restore=i % 2 == 0)
            built.append(model.state_dict())

    threads = [threading.Thread(target=rank, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 40
    assert all(torch.equal(state[k], alone[k]) for state in built for k in alone)

    torch.manual_seed(11)
    expected = torch.rand(3)
    torch.manual_seed(11)
    seeded(3, build, restore=True)
    assert torch.equal(torch.rand(3), expected)
