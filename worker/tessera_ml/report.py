"""How a rank tells the world what it is doing: metrics, log lines, progress, checkpoints.

The platform hands ranks a reporter that ships everything to the control plane; tests and
benchmarks use ``MemoryReporter``. Metric names follow ``docs/metrics.md``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


class Reporter(Protocol):
    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        """Record metric values at a training step (batched by the implementation)."""

    def log(self, message: str, *, level: str = "info") -> None:
        """Record a log line."""

    def progress(self, step: int, total: int | None) -> None:
        """Record how far the rank is."""

    def checkpoint(
        self, step: int, uri: str, size: int, sha256: str, *, kind: str = "checkpoint"
    ) -> None:
        """Record that a checkpoint (or, by ``kind``, an export or a revealed model) was
        written."""

    def flush(self) -> None:
        """Deliver whatever is buffered."""


@dataclass
class MetricPoint:
    step: int
    name: str
    value: float
    time: float
    """Unix time when the rank recorded it (the platform's points carry one too)."""


@dataclass
class MemoryReporter:
    """Keeps everything in memory; thread-safe. For tests and benchmarks."""

    points: list[MetricPoint] = field(default_factory=list)
    lines: list[tuple[str, str]] = field(default_factory=list)
    checkpoints: list[tuple[int, str, int, str]] = field(default_factory=list)
    artifacts: list[tuple[str, int, str, int, str]] = field(default_factory=list)
    """Exports and revealed models: (kind, step, folder, size, SHA-256)."""
    last_progress: tuple[int, int | None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        now = time.time()
        with self._lock:
            self.points.extend(MetricPoint(step, k, float(v), now) for k, v in values.items())

    def log(self, message: str, *, level: str = "info") -> None:
        with self._lock:
            self.lines.append((level, message))

    def progress(self, step: int, total: int | None) -> None:
        self.last_progress = (step, total)

    def checkpoint(
        self, step: int, uri: str, size: int, sha256: str, *, kind: str = "checkpoint"
    ) -> None:
        with self._lock:
            if kind == "checkpoint":
                self.checkpoints.append((step, uri, size, sha256))
            else:
                self.artifacts.append((kind, step, uri, size, sha256))

    def flush(self) -> None:
        return None

    def series(self, name: str) -> list[tuple[int, float]]:
        with self._lock:
            return [(p.step, p.value) for p in self.points if p.name == name]
