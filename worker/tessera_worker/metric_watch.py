"""Facts sampled beside a rank's training (its process, its GPU), reported as metrics.

``StepTracking`` remembers the latest step the rank reported, so that a sample taken on a
timer is recorded at the step the rank had reached; ``MetricWatch`` samples ``read()`` every
``interval_s`` on its own thread and once more when the rank ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from tessera_ml.report import Reporter
from tessera_worker.forwarding import Forwarding


class StepTracking(Forwarding):
    """A reporter that remembers the latest step the rank reported (metrics or progress) and
    the names of the metrics it reported."""

    def __init__(self, inner: Reporter) -> None:
        super().__init__(inner)
        self.step = 0
        self.names: set[str] = set()

    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        self.step = max(self.step, step)
        self.names.update(values)
        self.inner.metrics(step, values)

    def progress(self, step: int, total: int | None) -> None:
        self.step = max(self.step, step)
        self.inner.progress(step, total)


class MetricWatch:
    """Samples ``read()`` every ``interval_s`` and reports it at the rank's latest step."""

    def __init__(
        self,
        reporter: StepTracking,
        read: Callable[[], dict[str, float]],
        *,
        interval_s: float = 5.0,
        what: str = "facts",
    ) -> None:
        self._reporter = reporter
        self._read = read
        self._interval_s = interval_s
        self._what = what
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch {what}", daemon=True)

    def __enter__(self) -> MetricWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval_s + 1.0)
        self._report()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._report()

    def _report(self) -> None:
        try:
            values = self._read()
        except Exception as exc:  # a device gone bad must not end the rank from here
            self._reporter.log(f"{self._what} unavailable: {exc}", level="warning")
            self._stop.set()
            return
        if values:
            # beside the rank's own reports: the sampled names are not the algorithm's
            self._reporter.inner.metrics(self._reporter.step, values)
