"""The reporter a rank ships to the control plane: batched, bounded, retried in the background.

Training never waits on the network: calls append to bounded buffers and a sender thread posts
them. While the control plane is unreachable the buffers keep the newest items (metrics and log
lines beyond the bound are dropped oldest-first and counted); checkpoints are never dropped.
What is still undelivered when the rank ends goes to a spool file that its worker delivers
later (``deliver_spool``), so a control-plane outage at the end of a job loses nothing.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tessera_worker import rank_files
from tessera_worker.client import ApiError, ControlPlane
from tessera_worker.output import MAX_LINE
from tessera_worker.redaction import HostPaths

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
        spool: Path | None = None,
        share_files_of: int | None = None,
        files_in: Path | None = None,
        host_paths: HostPaths | None = None,
    ) -> None:
        """``share_files_of``: the attempt whose checkpoint files to upload after recording
        them (None: they stay on this host). ``files_in``: the job's checkpoint folder on this
        host; a checkpoint is recorded by its name inside it, so the members of the job, who
        read the records, do not learn this host's paths (None: recorded as given).
        ``host_paths``: hides this host's folders in the log lines sent."""
        self._api = api
        self._host_paths = host_paths
        self._files_in = files_in
        self._spool = spool
        self._share_files_of = share_files_of
        self.job_id = job_id
        self.task_id = task_id
        self.rank = rank
        self._points: deque[dict[str, Any]] = deque(maxlen=max_buffer)
        self._lines: deque[dict[str, Any]] = deque(maxlen=max_buffer)
        self._checkpoints: deque[dict[str, Any]] = deque()
        self.dropped = 0
        self._not_finite: set[str] = set()
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
        diverged: list[str] = []
        with self._lock:
            for name, value in values.items():
                if not math.isfinite(value):  # the control plane stores numbers only
                    if name not in self._not_finite:
                        diverged.append(f"{name}={float(value)}")
                        self._not_finite.add(name)
                    continue
                point = {"rank": self.rank, "name": name, "step": step, "value": float(value)}
                self._append(self._points, point | {"time": at})
        if diverged:
            self.log(
                f"step {step}: {', '.join(diverged)} is not a finite number; such values of "
                "these metrics are left out of the charts",
                level="warning",
            )

    def log(self, message: str, *, level: str = "info") -> None:
        message = message.replace("\x00", "\ufffd")  # NUL is refused in stored text
        if self._host_paths is not None:
            message = self._host_paths.hide(message)[:MAX_LINE]  # a name may be longer
        line = {"rank": self.rank, "level": level, "message": message, "time": _now()}
        with self._lock:
            self._append(self._lines, line)

    def progress(self, step: int, total: int | None) -> None:
        if total:
            self.metrics(step, {"progress": min(1.0, step / total)})

    def checkpoint(
        self, step: int, uri: str, size: int, sha256: str, *, kind: str = "checkpoint"
    ) -> None:
        body = {"task_id": self.task_id, "rank": self.rank, "step": step, "uri": self._name(uri)}
        if kind != "checkpoint":
            body["kind"] = kind
        with self._lock:
            self._checkpoints.append(body | {"size": size, "sha256": sha256})
            if self._share_files_of is not None:
                # the file RankContext wrote into the folder it reported
                path = str(Path(uri) / f"rank-{self.rank}.pt")
                self._checkpoints.append({"upload": path, "attempt": self._share_files_of} | body)
        self._wake.set()

    def _name(self, uri: str) -> str:
        if self._files_in is None:
            return uri
        folder = Path(uri)
        if folder.is_relative_to(self._files_in):
            return folder.relative_to(self._files_in).as_posix()
        return folder.name

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
        """Deliver what is buffered; what the control plane did not take in ``timeout_s`` goes
        to the spool file, for the worker to deliver. False when something was left over."""
        self._closed.set()
        self._wake.set()
        self._thread.join(timeout=2)
        if self.flush(timeout_s):
            return True
        if self._spool is not None:
            with self._sending, self._lock:
                left = {
                    "points": list(self._points),
                    "lines": list(self._lines),
                    "checkpoints": list(self._checkpoints),
                }
                self._points.clear()
                self._lines.clear()
                self._checkpoints.clear()
            self._spool.write_text(json.dumps(left))
        return False

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
        except OSError as exc:  # a checkpoint's file gone from disk: nothing to retry
            print(f"tessera: reporter dropped {len(batch)} items: {exc}", file=sys.stderr)
            return True
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


MAX_SPOOL_BYTES = 64 << 20
"""A spool file larger than this is dropped unread (a rank's buffer holds a few MB)."""
SPOOLED = ("checkpoints", "points", "lines")


def _spooled(folder: Path, spool: Path) -> dict[str, list[dict[str, Any]]]:
    """What a spool file holds, checked for its shape: the rank wrote it."""
    with rank_files.reading(folder, spool) as file:
        text = file.read(MAX_SPOOL_BYTES + 1)
        if len(text) > MAX_SPOOL_BYTES:
            raise ValueError(f"larger than {MAX_SPOOL_BYTES} bytes")
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    left = {name: data.get(name, []) for name in SPOOLED}
    for name, items in left.items():
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ValueError(f"{name!r} is not a list of objects")
    return left


def _own_checkpoint(item: dict[str, Any], task_id: str, rank: int, attempt: int) -> dict[str, Any]:
    """A spooled checkpoint item as this task's rank may send it: the worker delivers it with
    the party's token, so the task, the rank and the attempt are the worker's own, and the
    step and the size must be integers."""
    for name in ("step", "size"):
        if name in item and type(item[name]) is not int:
            raise ValueError(f"a checkpoint's {name} is not an integer")
    pinned = {"task_id": task_id, "rank": rank}
    return item | pinned | ({"attempt": attempt} if "upload" in item else {})


def deliver_spool(
    api: ControlPlane, job_id: str, task_id: str, spool: Path, files_in: Path, attempt: int
) -> None:
    """Post what a rank left in its spool file (``rank-<n>.spool.json``), then remove it;
    raises while the control plane cannot take it (retry later), drops what it refuses for
    good. The rank wrote the file: it is read as a regular file of its folder, checked for its
    shape, its checkpoints are sent as this task's rank n's of ``attempt``, and a checkpoint
    file it names is uploaded only from ``files_in`` (the job's checkpoint folder), through
    no link."""
    folder = spool.parent
    try:
        rank = int(spool.name.split(".")[0].removeprefix("rank-"))
        left = _spooled(folder, spool)
    except (OSError, ValueError) as exc:
        print(f"tessera: dropped the spool {spool.name}: {exc}", file=sys.stderr)
        with contextlib.suppress(OSError):
            spool.unlink()
        return

    def checkpoint(batch: list[dict[str, Any]]) -> None:
        item = _own_checkpoint(batch[0], task_id, rank, attempt)
        if "upload" not in item:
            api.post_checkpoint(job_id, item)
            return
        with rank_files.reading(files_in, Path(str(item["upload"]))) as file:
            api.put_checkpoint_file(job_id, item, file)

    sends: list[tuple[list[dict[str, Any]], Callable[[list[dict[str, Any]]], None]]] = [
        (left["checkpoints"], checkpoint),
        (left["points"], lambda b: api.post_metrics(job_id, task_id, b)),
        (left["lines"], lambda b: api.post_logs(job_id, task_id, b)),
    ]
    for items, post in sends:
        size = 1 if items is left["checkpoints"] else MAX_BATCH
        while items:
            batch = items[:size]
            try:
                post(batch)
            except ApiError as exc:
                if exc.retryable:
                    rank_files.write_text(folder, spool, json.dumps(left))  # what is left
                    raise
                print(f"tessera: dropped {len(batch)} spooled items: {exc}", file=sys.stderr)
            except (OSError, ValueError) as exc:  # a file gone or not a plain one; bad numbers
                print(f"tessera: dropped {len(batch)} spooled items: {exc}", file=sys.stderr)
            except httpx.HTTPError:
                rank_files.write_text(folder, spool, json.dumps(left))
                raise
            del items[:size]
    with contextlib.suppress(OSError):
        spool.unlink()
