"""Training steps on shares follow the plaintext reference; the mix beats all32."""

import pytest

from .steps import train_both


def _worst(mode: str, comparison: str = "tree", truncation: str = "masked") -> tuple[float, float]:
    run = train_both(mode, steps=3, comparison=comparison, truncation=truncation)
    err = max((run.secure[k] - run.plain[k]).abs().max().item() for k in run.plain)
    moved = max((run.plain[k] - run.initial[k]).abs().max().item() for k in run.plain)
    return err, moved


@pytest.mark.parametrize(
    ("mode", "comparison", "truncation"),
    [
        ("mixed", "tree", "masked"),
        ("all64", "tree", "masked"),
        ("mixed", "fan_in", "masked"),
        ("all64", "fan_in", "local"),
        ("mixed", "tree", "local"),  # its softmax lifted to Z_2^64 after the first square
    ],
)
def test_secure_steps_track_the_plaintext_reference(
    mode: str, comparison: str, truncation: str
) -> None:
    err, moved = _worst(mode, comparison, truncation)
    assert moved > 0.05
    assert err < moved / 10


def _update_error(mode: str) -> tuple[float, float]:
    """Small learning rate: updates below Z_2^32's resolution at 12 fractional bits."""
    run = train_both(mode, steps=3, lr=0.002)
    learned = [k for k in run.plain if not k.startswith(("mean", "var"))]
    err = max(
        ((run.secure[k] - run.initial[k]) - (run.plain[k] - run.initial[k])).abs().max().item()
        for k in learned
    )
    update = max((run.plain[k] - run.initial[k]).abs().max().item() for k in learned)
    return err, update


def test_high_precision_weights_keep_updates_that_all32_loses() -> None:
    mixed, update = _update_error("mixed")
    all32, _ = _update_error("all32")
    assert mixed < update / 5
    assert all32 > 5 * mixed
