"""A worker's standing with the control plane: registration, heartbeat, and which tasks to stop."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from tessera_worker.client import ApiError, ControlPlane
from tessera_worker.identity import WorkerIdentity


class Agent:
    """Registers this machine for one party and heartbeats while tasks come and go.

    ``track(task_id)`` gives a task its stop signal; the signal is set when a heartbeat reply
    names the task (a cancel, or another party's failure), or when the worker shuts down.
    """

    def __init__(
        self,
        api: ControlPlane,
        *,
        describe: Callable[[], dict[str, Any]],
        accelerators: Callable[[], list[dict[str, Any]]],
        heartbeat_s: float = 2.0,
        on_new_identity: Callable[[str], None] | None = None,
        identity: WorkerIdentity | None = None,
        on_cut_off: Callable[[str], None] | None = None,
    ) -> None:
        self.api = api
        self.identity = identity
        self._describe = describe
        self._accelerators = accelerators
        self.heartbeat_s = heartbeat_s
        self._on_new_identity = on_new_identity
        self._on_cut_off = on_cut_off
        self.worker_id: str | None = None
        self._tasks: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self.beats = 0
        self.shutting_down = False

    def register(self) -> str:
        """Register (again), asking for a certificate of this worker's key."""
        info = self._describe()
        if self.identity is not None:
            info["csr"] = self.identity.request()
        worker = self.api.register(info)
        if self.identity is not None:
            self.identity.accept(worker)
        self.worker_id = str(worker["id"])
        return self.worker_id

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @contextlib.contextmanager
    def track(self, task_id: str) -> Iterator[threading.Event]:
        stop = threading.Event()
        with self._lock:
            self._tasks[task_id] = stop
            if self.shutting_down:  # a task taken up as the worker began to stop
                stop.set()
        try:
            yield stop
        finally:
            with self._lock:
                self._tasks.pop(task_id, None)

    def running(self) -> list[str]:
        with self._lock:
            return list(self._tasks)

    def stop_everything(self) -> None:
        """The worker is shutting down: stop every task it runs, and any it takes up later."""
        with self._lock:
            self.shutting_down = True
            for event in self._tasks.values():
                event.set()

    def beat(self) -> list[str]:
        """One heartbeat; sets the stop signal of every task the reply names."""
        if self.worker_id is None:
            self.register()
        assert self.worker_id is not None
        body: dict[str, Any] = {"running_tasks": self.running()}
        if self.beats % 15 == 0:
            body["accelerators"] = self._accelerators()
        try:
            reply = self.api.heartbeat(self.worker_id, body)
        except ApiError as exc:
            if exc.status != 404:
                raise
            previous = self.worker_id
            if self.register() != previous and self._on_new_identity is not None:
                self._on_new_identity(self.worker_id)
            return []
        self.beats += 1
        stop = [str(t) for t in reply.get("stop_tasks", [])]
        with self._lock:
            for task_id in stop:
                event = self._tasks.get(task_id)
                if event is not None:
                    event.set()
        return stop

    def _loop(self) -> None:
        while not self._closed.wait(self.heartbeat_s):
            try:
                self.beat()
            except ApiError as exc:
                if exc.code == "party_disabled":
                    self.stop_everything()
                    if self._on_cut_off is not None:
                        self._on_cut_off(exc.detail)
                    return
                print(f"tessera worker: heartbeat failed: {exc}", file=sys.stderr, flush=True)
            except httpx.HTTPError as exc:
                print(f"tessera worker: heartbeat failed: {exc}", file=sys.stderr, flush=True)
