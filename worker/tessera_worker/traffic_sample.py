"""The rank's communicator byte counters, for ``MetricWatch``, under the names of
``docs/metrics.md`` (``bytes_sent``, ``bytes_received``, ``bytes_sent.to.<rank>``,
``bytes_sent.group.<name>``): each one the algorithm does not report itself. A rank that only
serves others (a dealer, a parameter server) and a rank that reports totals but not per peer
still show what they sent, and to whom."""

from __future__ import annotations

from tessera_ml.comm.base import ByteStats
from tessera_worker.metric_watch import StepTracking


class TrafficSample:
    def __init__(self, stats: ByteStats, reporter: StepTracking) -> None:
        self._stats = stats
        self._reporter = reporter

    def __call__(self) -> dict[str, float]:
        own = self._reporter.names
        return {name: v for name, v in self._stats.metrics().items() if name not in own}
