"""What a benchmark lends the ranks it measures: link counters, device pacing, turn-taking and
CPU pinning, as hooks on ``RankContext.harness``.

A platform job's ranks get ``Harness()``, which measures and shapes nothing. A benchmark passes
its own (``tessera_ml.bench.harness``) through ``run_algorithm``. Algorithms call these hooks
and never look for a testbed, a pacing option or an environment variable themselves, so a
platform job runs exactly the code a benchmark measures.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass


@dataclass(frozen=True)
class LinkBytes:
    """Bytes through one host's link, as its interface counted them."""

    sent: int
    received: int


class Harness:
    """The hooks; this base does nothing."""

    def link_bytes(self) -> LinkBytes | None:
        """The counters of this rank's host link, where the harness can read them."""
        return None

    def work(self) -> AbstractContextManager[None]:
        """Around a piece of device work (forward, backward, an update): a harness may stretch
        it to emulate a slower device."""
        return nullcontext()

    def catch_up(self) -> None:
        """Inside ``work``, where the rank lets its peers see progress (a bucket of gradients
        ready): a harness that stretches work lets the time catch up with the work so far."""

    def turn(self, index: int, meet: Callable[[], None]) -> AbstractContextManager[None]:
        """Around one step of member ``index`` (0 or 1) of a pair that meets through ``meet``:
        a harness may hold the machine for it, so side-by-side runs take turns."""
        return nullcontext()

    def pin(self, index: int) -> None:
        """Before the first step of member ``index`` of a pair: a harness may keep it to a CPU
        of its own."""


NO_HARNESS = Harness()
