"""A reporter that passes every call to the one it wraps: the base of the wrappers that add
something to a rank's reports (sampled facts, progress lines)."""

from __future__ import annotations

from collections.abc import Mapping

from tessera_ml.report import Reporter


class Forwarding:
    def __init__(self, inner: Reporter) -> None:
        self.inner = inner

    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        self.inner.metrics(step, values)

    def progress(self, step: int, total: int | None) -> None:
        self.inner.progress(step, total)

    def log(self, message: str, *, level: str = "info") -> None:
        self.inner.log(message, level=level)

    def checkpoint(
        self, step: int, uri: str, size: int, sha256: str, *, kind: str = "checkpoint"
    ) -> None:
        self.inner.checkpoint(step, uri, size, sha256, kind=kind)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
