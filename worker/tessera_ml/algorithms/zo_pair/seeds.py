"""Seeds every processor derives on its own, so no seed ever crosses the network."""

from __future__ import annotations

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
"""splitmix64's state increment (the golden ratio in 64 bits)."""
MUL1, MUL2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def splitmix64(state: int) -> int:
    """splitmix64's output for a 64-bit state."""
    z = state & MASK
    z = ((z ^ (z >> 30)) * MUL1) & MASK
    z = ((z ^ (z >> 27)) * MUL2) & MASK
    return z ^ (z >> 31)


def mix(*values: int) -> int:
    """A 63-bit seed from integers (splitmix64's output chained over the values)."""
    h = GAMMA
    for v in values:
        h = splitmix64((h ^ (v & MASK)) + GAMMA)
    return h >> 1


DIRECTION_STREAM = 1
DATA_STREAM = 2


def direction_seed(job_seed: int, step: int, direction: int) -> int:
    """Seed of perturbation ``direction`` (0 for the shared one, pair index + 1 otherwise)."""
    return mix(DIRECTION_STREAM, job_seed, step, direction)


def data_seed(job_seed: int, pair: int, epoch: int) -> int:
    """Seed of the order in which a pair reads its inputs during one epoch."""
    return mix(DATA_STREAM, job_seed, pair, epoch)
