"""What a compute party receives during training: uniform-looking, and never plaintext."""

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed.ring import Ring

from .steps import Run, train_both


def _plaintexts(run: Run) -> dict[torch.dtype, set[int]]:
    """Encodings of the data, labels, weights and gradients of the run, in both rings."""
    values = [run.x, run.onehot]
    values += list(run.initial.values()) + list(run.plain.values())
    values += [run.initial[k] - run.plain[k] for k in run.plain]  # the summed updates
    found: dict[torch.dtype, set[int]] = {torch.int32: set(), torch.int64: set()}
    for ring in (Ring(32, 12), Ring(64, 20)):
        for frac in (ring.frac, 2 * ring.frac):
            for v in values:
                scaled = torch.round(v.double().flatten() * 2.0**frac)
                keep = scaled.abs() < 2.0 ** (ring.bits - 1)
                found[ring.dtype].update(scaled[keep].to(torch.int64).tolist())
    return found


def _bit_balance(words: torch.Tensor, bits: int) -> torch.Tensor:
    as64 = words.to(torch.int64)
    return torch.stack([((as64 >> k) & 1).double().mean() for k in range(bits)])


@pytest.mark.parametrize(
    ("comparison", "truncation"), [("tree", "masked"), ("fan_in", "masked"), ("tree", "local")]
)
def test_messages_are_uniform_and_carry_no_plaintext(comparison: str, truncation: str) -> None:
    run = train_both("mixed", steps=2, comparison=comparison, truncation=truncation)
    secrets = _plaintexts(run)
    for received in run.received:
        assert len(received) > 100
        by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
        for msg in received:
            by_dtype.setdefault(msg.dtype, []).append(msg.flatten())
        assert set(by_dtype) == {torch.int32, torch.int64, torch.uint8}
        for dtype, bits in ((torch.int32, 32), (torch.int64, 64)):
            words = torch.cat(by_dtype[dtype])
            n = words.numel()
            # every bit position of every word is a fair coin (5 sigma)
            balance = _bit_balance(words, bits)
            assert (balance - 0.5).abs().max().item() < 5 * 0.5 / n**0.5 + 1e-3
            # byte histogram: chi-square against uniform, far from the tail
            hist = torch.bincount(
                words.contiguous().view(torch.uint8).to(torch.int64), minlength=256
            )
            expected = hist.sum().item() / 256
            chi2 = ((hist - expected) ** 2 / expected).sum().item()
            assert chi2 < 255 + 8 * (2 * 255) ** 0.5
            # plaintext values occur no more often than chance collisions would explain
            hits = sum(1 for w in words.tolist() if w in secrets[dtype])
            chance = n * len(secrets[dtype]) / 2.0**bits
            assert hits <= chance + 5 * chance**0.5 + 5, (dtype, hits, chance)
        bits_opened = torch.cat(by_dtype[torch.uint8]).double()
        assert set(bits_opened.unique().tolist()) <= {0.0, 1.0}
        assert abs(bits_opened.mean().item() - 0.5) < 5 * 0.5 / bits_opened.numel() ** 0.5


def test_the_check_would_catch_a_leak() -> None:
    """Sanity of the detector: encoded data among uniform words is found."""
    run = train_both("mixed", steps=1)
    secrets = _plaintexts(run)
    leaked = Ring(32, 12).encode(run.x).flatten()
    hits = sum(1 for w in leaked.tolist() if w in secrets[torch.int32])
    assert hits == leaked.numel()
    balance = _bit_balance(leaked, 32)
    assert (balance - 0.5).abs().max().item() > 0.4
