"""The reporter a rank ships to the control plane: batched, bounded, retried in the background.

Training never waits on the network: calls append to bounded buffers and a sender thread posts
them. While the control plane is unreachable the buffers keep the newest items (metrics and log
lines beyond the bound are dropped oldest-first and counted); checkpoints are never dropped.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from tessera_worker.client import ApiError, ControlPlane

MAX_BATCH = 500


def _now() -> str:
    return datetime.now(UTC).isoformat()


class HttpReporter:
    """``tessera_ml.report.Reporter`` over the control plane's ingest routes."""

    def __init__(
        self,
        api: ControlPlane,
        *,
        job_id: str,
        task_id: str,
        rank: int,
        max_buffer: int = 20_000,
        flush_interval_s: float = 0.5,
        max_backoff_s: float = 5.0,
    ) -> None:
        self._api = api
        self.job_id = job_id
        self.task_id = task_id
        self.rank = rank
        self._points: deque[dict[str, Any]] = deque(maxlen=max_buffer)
        self._lines: deque[dict[str, Any]] = deque(maxlen=max_buffer)
        self._checkpoints: deque[dict[str, Any]] = deque()
        self.dropped = 0
        self.failures = 0
        self._interval = flush_interval_s
        self._max_backoff = max_backoff_s
        self._lock = threading.Lock()
        # one post at a time, whether from the sender thread or flush(): the control plane gets
        # each kind in order and never two batches of one series at once
        self._sending = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reporter", daemon=True)
        self._thread.start()

    # -- the Reporter protocol -------------------------------------------------------------
    def metrics(self, step: int, values: Mapping[str, float]) -> None:
        at = _now()
        with self._lock:
            for name, value in values.items():
                point = {"rank": self.rank, "name": name, "step": step, "value": float(value)}
                self._append(self._points, point | {"time": at})

    def log(self, message: str, *, level: str = "info") -> None:
        line = {"rank": self.rank, "level": level, "message": message, "time": _now()}
        with self._lock:
            self._append(self._lines, line)

    def progress(self, step: int, total: int | None) -> None:
        if total:
            self.metrics(step, {"progress": min(1.0, step / total)})

    def checkpoint(self, step: int, uri: str, size: int, sha256: str) -> None:
        body = {"task_id": self.task_id, "rank": self.rank, "step": step, "uri": uri}
        with self._lock:
            self._checkpoints.append(body | {"size": size, "sha256": sha256})
        self._wake.set()

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Deliver everything buffered; False when the control plane stayed unreachable."""
        deadline = time.monotonic() + timeout_s
        while self._pending():
            if self._send_once():
                continue
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
        return True

    def close(self, timeout_s: float = 10.0) -> bool:
        self._closed.set()
        self._wake.set()
        self._thread.join(timeout=2)
        return self.flush(timeout_s)

    # -- internals -------------------------------------------------------------------------
    def _append(self, buffer: deque[dict[str, Any]], item: dict[str, Any]) -> None:
        if buffer.maxlen is not None and len(buffer) == buffer.maxlen:
            self.dropped += 1
        buffer.append(item)
        if len(buffer) >= MAX_BATCH:
            self._wake.set()

    def _pending(self) -> bool:
        with self._lock:
            return bool(self._points or self._lines or self._checkpoints)

    def _run(self) -> None:
        backoff = self._interval
        while not self._closed.is_set():
            self._wake.wait(backoff)
            self._wake.clear()
            if self._closed.is_set():
                return
            ok = self._send_once()
            backoff = self._interval if ok else min(self._max_backoff, backoff * 2)

    def _send_once(self) -> bool:
        """Post one batch of each kind; False when a retryable error left items buffered."""
        with self._sending:
            return all(
                (
                    self._send(self._checkpoints, 1, self._post_checkpoint),
                    self._send(self._points, MAX_BATCH, self._post_points),
                    self._send(self._lines, MAX_BATCH, self._post_lines),
                )
            )

    def _send(
        self,
        buffer: deque[dict[str, Any]],
        size: int,
        post: Callable[[list[dict[str, Any]]], None],
    ) -> bool:
        with self._lock:
            batch = [buffer.popleft() for _ in range(min(size, len(buffer)))]
        if not batch:
            return True
        try:
            post(batch)
        except (httpx.HTTPError, ApiError) as exc:
            if isinstance(exc, ApiError) and not exc.retryable:
                print(f"tessera: reporter dropped {len(batch)} items: {exc}", file=sys.stderr)
                return True
            self.failures += 1
            with self._lock:
                for item in reversed(batch):
                    if buffer.maxlen is not None and len(buffer) == buffer.maxlen:
                        self.dropped += 1
                        break
                    buffer.appendleft(item)
            return False
        return True

    def _post_points(self, batch: list[dict[str, Any]]) -> None:
        self._api.post_metrics(self.job_id, self.task_id, batch)

    def _post_lines(self, batch: list[dict[str, Any]]) -> None:
        self._api.post_logs(self.job_id, self.task_id, batch)

    def _post_checkpoint(self, batch: list[dict[str, Any]]) -> None:
        self._api.post_checkpoint(self.job_id, batch[0])
