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


class Sets(dict[str, str]):
    """The ``--set key=value`` options, read as numbers by name: a value that is not one fails
    naming its key (``--set ranks=abc: not an integer``)."""

    def integer(self, key: str, default: int) -> int:
        return self._number(key, default, int, "an integer")

    def real(self, key: str, default: float) -> float:
        return self._number(key, default, float, "a number")

    def integers(self, key: str, default: str) -> list[int]:
        """A comma-separated list of integers (``--set hidden=64,32``)."""
        raw = self.get(key, default)
        try:
            return [int(item) for item in raw.split(",")]
        except ValueError:
            raise ValueError(f"--set {key}={raw}: not a comma-separated list of integers") from None

    def _number(self, key: str, default: Any, kind: type, what: str) -> Any:
        if key not in self:
            return default
        try:
            return kind(self[key])
        except ValueError:
            raise ValueError(f"--set {key}={self[key]}: not {what}") from None


@dataclass(frozen=True)
class BenchArgs:
    quick: bool = False
    """Finish in under a minute on 2 CPU cores."""
    netns: bool = False
    """Run ranks in simulated hosts joined by rate-limited links (see ``tessera_ml.netns``)."""
    model: str | None = None
    """Algorithm-specific model choice, e.g. ``cnn``."""
    extra: Sets = field(default_factory=Sets)
    """Further ``--set key=value`` options, algorithm-specific."""

    def __post_init__(self) -> None:
        if not isinstance(self.extra, Sets):
            object.__setattr__(self, "extra", Sets(self.extra))


@dataclass
class BenchReport:
    params: dict[str, Any]
    results: dict[str, Any]
