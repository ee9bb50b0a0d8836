"""Progress of a rank as log lines: its step, the share done, its speed and headline metrics.

Algorithms report progress as numbers (``progress`` and their metrics); a reader of the logs
wants a line now and then. ``ProgressLines`` wraps the rank's reporter and writes one line at
the first step, then at most every ``interval_s`` seconds, and at the last step (or when the
rank closes on a step not yet described).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from tessera_ml.report import Reporter
from tessera_worker.forwarding import Forwarding

HEADLINE = ("loss", "eval_loss", "accuracy", "eval_accuracy", "auc", "eval_auc", "throughput")
PREFIX = "progress:"


def _number(value: float) -> str:
    return f"{value:.4g}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class ProgressLines(Forwarding):
    """A reporter that also describes the rank's progress in log lines (see the module)."""

    def __init__(
        self,
        inner: Reporter,
        *,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(inner)
        self._interval_s = interval_s
        self._clock = clock
        self._started = clock()
        self._last_line_at: float | None = None
        self._step = 0
        self._described = -1
        self._total: int | None = None
        self._values: dict[str, float] = {}
        self._lock = threading.Lock()

    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        self.inner.metrics(step, values)
        with self._lock:
            for name in HEADLINE:
                if name in values:
                    self._values[name] = float(values[name])

    def progress(self, step: int, total: int | None) -> None:
        self.inner.progress(step, total)
        with self._lock:
            self._step = max(self._step, step)
            self._total = total or self._total
            now = self._clock()
            due = (
                self._last_line_at is None
                or now - self._last_line_at >= self._interval_s
                or (self._total is not None and self._step >= self._total)
            )
            line = self._line(now) if due and self._step != self._described else None
        if line is not None:
            self.inner.log(line)

    def _line(self, now: float) -> str:
        self._last_line_at = now
        self._described = self._step
        parts = [f"{PREFIX} step {self._step}"]
        if self._total:
            parts[0] += f"/{self._total} ({100 * self._step / self._total:.0f}%)"
        elapsed = now - self._started
        if elapsed > 0 and self._step > 0:
            rate = self._step / elapsed
            speed = f"{rate:.3g} steps/s"
            if self._total and self._step < self._total:
                speed += f", about {_duration((self._total - self._step) / rate)} left"
            parts.append(speed)
        parts += [
            f"{name} {_number(self._values[name])}" for name in HEADLINE if name in self._values
        ]
        return " · ".join(parts)

    def describe_last(self) -> None:
        """Describe the latest step if no line did yet."""
        with self._lock:
            last = self._step > 0 and self._step != self._described
            line = self._line(self._clock()) if last else None
        if line is not None:
            self.inner.log(line)

    def close(self) -> None:
        """Describe the latest step if no line did yet, then close the reporter underneath."""
        self.describe_last()
        super().close()
