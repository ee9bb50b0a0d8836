"""Training steps on shares follow the plaintext reference; the mix beats all32."""

import pytest

from .steps import train_both


def _worst(mode: str) -> tuple[float, float]:
    run = train_both(mode, steps=3)
    err = max((run.secure[k] - run.plain[k]).abs().max().item() for k in run.plain)
    moved = max((run.plain[k] - run.initial[k]).abs().max().item() for k in run.plain)
    return err, moved


@pytest.mark.parametrize("mode", ["mixed", "all64"])
def test_secure_steps_track_the_plaintext_reference(mode: str) -> None:
    err, moved = _worst(mode)
    assert moved > 0.05
    assert err < moved / 10


def test_all32_drifts_further_than_the_mixed_rings() -> None:
    mixed, _ = _worst("mixed")
    all32, _ = _worst("all32")
    assert all32 > 3 * mixed
