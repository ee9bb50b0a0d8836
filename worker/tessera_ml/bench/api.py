"""What an algorithm's benchmark module provides to the ``tessera bench`` harness.

Each algorithm folder may hold ``bench.py`` with ``def bench(args: BenchArgs) -> BenchReport``.
The harness adds the algorithm name, prints a table and writes
``{"algorithm": NAME, "params": {...}, "results": {...}}``. Units: bytes and seconds;
accuracies and AUCs are fractions in [0, 1]. Baselines run in the same invocation, and
results carry both numbers (``step_time_s`` beside ``ddp_step_time_s``) so ratios are honest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BenchArgs:
    quick: bool = False
    """Finish in under a minute on 2 CPU cores."""
    netns: bool = False
    """Run ranks in simulated hosts joined by rate-limited links (see ``tessera_ml.netns``)."""
    model: str | None = None
    """Algorithm-specific model choice, e.g. ``cnn``."""
    extra: dict[str, str] = field(default_factory=dict)
    """Further ``--set key=value`` options, algorithm-specific."""


@dataclass
class BenchReport:
    params: dict[str, Any]
    results: dict[str, Any]
