"""The harness benchmarks and the tests' runner lend ranks (``run_algorithm(harness=...)``).

- link counters: on a testbed host (``run_world`` places the rank there), its link's counters;
- ``speed`` below 1 paces the rank's device work (``tessera_ml.pace``) to emulate a slower
  device on a CPU machine;
- ``turns`` (a lock file's path) makes the compute pairs of jobs run side by side take turns
  step by step, each member kept to a CPU of its own (``tessera_ml.bench.turns``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from tessera_ml.bench.turns import keep_to_cpu, turn
from tessera_ml.harness import Harness, LinkBytes
from tessera_ml.netns import testbed_link_bytes
from tessera_ml.pace import Pace


@dataclass
class BenchHarness(Harness):
    speed: float = 1.0
    turns: str | None = None
    _pace: Pace | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.speed <= 1.0:
            raise ValueError(f"speed must be in (0, 1], got {self.speed}")
        if self.speed < 1.0:
            self._pace = Pace(self.speed)

    def link_bytes(self) -> LinkBytes | None:
        return testbed_link_bytes()

    def work(self) -> AbstractContextManager[None]:
        if self._pace is None:
            return nullcontext()
        return self._pace.work()

    def catch_up(self) -> None:
        if self._pace is not None:
            self._pace.catch_up()

    def turn(self, index: int, meet: Callable[[], None]) -> AbstractContextManager[None]:
        if self.turns is None:
            return nullcontext()
        return turn(self.turns, index, meet)

    def pin(self, index: int) -> None:
        if self.turns is not None:
            keep_to_cpu(index)
