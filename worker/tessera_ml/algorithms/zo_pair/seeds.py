"""Seeds every processor derives on its own, so no seed ever crosses the network."""

from __future__ import annotations

_MASK = (1 << 64) - 1


def mix(*values: int) -> int:
    """A 63-bit seed from integers (splitmix64 finalizer chained over the values)."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (v & _MASK)) & _MASK
        h = (h + 0x9E3779B97F4A7C15) & _MASK
        h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _MASK
        h ^= h >> 31
    return h >> 1


DIRECTION_STREAM = 1
DATA_STREAM = 2


def direction_seed(job_seed: int, step: int, direction: int) -> int:
    """Seed of perturbation ``direction`` (0 for the shared one, pair index + 1 otherwise)."""
    return mix(DIRECTION_STREAM, job_seed, step, direction)


def data_seed(job_seed: int, pair: int, epoch: int) -> int:
    """Seed of the order in which a pair reads its inputs during one epoch."""
    return mix(DATA_STREAM, job_seed, pair, epoch)
