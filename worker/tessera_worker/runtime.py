"""What a worker does with one task id: fetch, rendezvous, launch, report. Idempotent.

A task that is already finished is skipped; one that was already started by a worker that died
meanwhile (the broker redelivers it) is failed, because its ranks died with that worker.
"""

from __future__ import annotations

import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from tessera_ml.ports import port_of, reserve_port
from tessera_ml.registry import get_spec
from tessera_worker import task_locks
from tessera_worker.agent import Agent
from tessera_worker.client import ApiError, ControlPlane
from tessera_worker.identity import TaskCredentials, WorkerIdentity
from tessera_worker.launch import TERMINAL, Rendezvous, TaskLaunch
from tessera_worker.launcher import LaunchSettings, Outcome, launch_ranks
from tessera_worker.output import MAX_LINE
from tessera_worker.redaction import HostPaths
from tessera_worker.reporter import deliver_spool


class TaskAbort(Exception):
    """The task cannot run; ``reason`` says why."""


class ControlPlaneUnavailable(Exception):
    """The task could not even be looked up; its message should be delivered again later."""


def allowed(target: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``module:callable`` is under one of ``prefixes`` (a package, a module, or a
    ``module:callable`` itself); ``mypkg`` allows ``mypkg.models:make``, not ``mypkgx:f``."""
    module = target.partition(":")[0]
    for prefix in prefixes:
        if ":" in prefix:
            if target == prefix:
                return True
        elif module == prefix or module.startswith(prefix + "."):
            return True
    return False


@dataclass
class Runtime:
    """Everything a worker needs to run tasks of its party."""

    party: str
    api: ControlPlane
    agent: Agent
    launch: LaunchSettings
    address: str
    identity: WorkerIdentity
    rendezvous_poll_s: float = 0.5
    peer_loss_delay_s: float = 3.0
    report_patience_s: float = 900.0
    _claimed: set[str] = field(default_factory=set)
    _claiming: threading.Lock = field(default_factory=threading.Lock)

    def execute(self, task_id: str) -> str:
        """Run one task to its end; returns the status reported (or ``skipped``)."""
        with self._claiming:
            # a message sent twice (a scheduler that took over sends again what its
            # predecessor may not have sent) runs the task once
            if task_id in self._claimed:
                return "skipped"
            self._claimed.add(task_id)
        try:
            return self._execute(task_id)
        finally:
            with self._claiming:
                self._claimed.discard(task_id)

    def _execute(self, task_id: str) -> str:
        try:
            launch = TaskLaunch.model_validate(self.api.task(task_id))
        except ApiError as exc:
            if exc.status == 404:
                return "skipped"
            if exc.retryable:
                raise ControlPlaneUnavailable(str(exc)) from exc
            raise
        except httpx.TransportError as exc:
            raise ControlPlaneUnavailable(f"cannot reach the control plane: {exc}") from exc
        if launch.status in TERMINAL:
            return "skipped"
        if launch.status in {"starting", "running"}:
            self._report(launch, Outcome("failed", "the worker restarted while running the task"))
            return "failed"
        with self.agent.track(task_id) as stop:
            try:
                with task_locks.running(self.launch.home, launch.task_id):
                    outcome = self._run(launch, stop)  # turns any error into an outcome
            except OSError as exc:
                outcome = Outcome("failed", f"worker could not lock the task in its home: {exc}")
            if outcome.status == "cancelled" and self.agent.shutting_down:
                outcome = Outcome("failed", "the worker shut down while the task ran")
            if outcome.lost_a_peer:
                # the party whose rank really failed reports first; the control plane keeps
                # the first failure as the attempt's reason
                stop.wait(self.peer_loss_delay_s)
        self._report(launch, outcome)
        return outcome.status

    def _run(self, launch: TaskLaunch, stop: threading.Event) -> Outcome:
        credentials: TaskCredentials | None = None
        listener: socket.socket | None = None
        try:
            self.api.post_status(launch.task_id, "starting")
            entry_point = self._entry_point(launch)
            credentials = self.identity.task_credentials(
                self.api, launch.task_id, self.launch.task_dir(launch.task_id)
            )
            # rank 0's worker holds the store's port from the moment it publishes it: a port
            # only looked up could be taken (by any outgoing connection) before rank 0 binds it
            listener = reserve_port(self.address) if launch.hosts_rank_zero else None
            rendezvous = self._rendezvous(launch, stop, listener)
            if rendezvous is None:
                return Outcome("cancelled", "stopped before the world met")
            return launch_ranks(
                launch,
                rendezvous,
                self.launch,
                stop,
                entry_point=entry_point,
                credentials=credentials,
                on_started=lambda _: self.api.post_status(launch.task_id, "running"),
                store_listener=listener,  # closed there once the ranks started
            )
        except TaskAbort as exc:
            return Outcome("failed", str(exc))
        except ApiError as exc:
            if exc.status == 409:
                return Outcome("cancelled", f"the control plane no longer runs the task: {exc}")
            return Outcome("failed", f"the control plane refused the task: {exc}")
        except httpx.HTTPError as exc:
            return Outcome("failed", f"worker lost the control plane: {exc}")
        except Exception as exc:
            text = f"worker error: {exc!r}\n{traceback.format_exc(limit=3)}"
            return Outcome("failed", HostPaths(self.launch.home).hide(text)[:2000])
        finally:
            if listener is not None:
                listener.close()
            if credentials is not None:
                credentials.remove()

    def _entry_point(self, launch: TaskLaunch) -> str:
        """The entry point of a job this party approved, importing only code this worker allows."""
        if not launch.approved:
            raise TaskAbort(f"party {self.party} has not approved job {launch.job_id}")
        spec = get_spec(launch.algorithm)
        if spec is None:
            raise TaskAbort(f"this worker has no algorithm {launch.algorithm!r}")
        try:
            config = spec.parse_config(launch.config)
        except ValueError as exc:
            raise TaskAbort(f"the job's configuration is not valid here: {exc}") from exc
        for loc, target in spec.code_targets(config):
            if not allowed(target, self.launch.allow_custom):
                where = ".".join(str(p) for p in loc)
                raise TaskAbort(
                    f"the job imports {target!r} ({where}), which this worker does not allow; "
                    "its operator can allow it with tessera worker --allow-custom PREFIX"
                )
        return spec.entry_point

    def _rendezvous(
        self, launch: TaskLaunch, stop: threading.Event, listener: socket.socket | None
    ) -> Rendezvous | None:
        if listener is not None:
            # rank 0 serves the store here; the control plane adds the attempt's secret
            self.api.post_rendezvous(launch.task_id, self.address, port_of(listener))
        deadline = time.monotonic() + self.launch.rendezvous_timeout_s
        while not stop.is_set():
            current = TaskLaunch.model_validate(self.api.task(launch.task_id))
            if current.rendezvous is not None:
                return current.rendezvous
            if time.monotonic() > deadline:
                raise TaskAbort(
                    f"rank 0 published no rendezvous within {self.launch.rendezvous_timeout_s:g} s"
                )
            stop.wait(self.rendezvous_poll_s)
        return None

    def _report(self, launch: TaskLaunch, outcome: Outcome) -> None:
        """Deliver what the ranks left undelivered and the failed rank's last lines, then the
        task's status; retried through an outage of the control plane (``report_patience_s``),
        so a job whose ranks finished meanwhile still ends with all it reported. A worker that
        is shutting down tries once: the control plane learns of its tasks from its missing
        heartbeats, and the worker's exit does not wait for a control plane that is down."""
        job_lines = [
            {"rank": outcome.rank, "level": "error", "message": line[:MAX_LINE], "time": _now()}
            for line in outcome.last_lines
        ]
        spools = sorted(self.launch.log_dir(launch.task_id).glob("rank-*.spool.json"))
        deadline = time.monotonic() + self.report_patience_s
        attempt = 0
        while True:
            try:
                while spools:
                    deliver_spool(
                        self.api,
                        launch.job_id,
                        launch.task_id,
                        spools[0],
                        files_in=self.launch.checkpoint_dir(launch.job_id),
                        attempt=launch.attempt,
                    )
                    spools.pop(0)
                if job_lines:
                    try:
                        self.api.post_logs(launch.job_id, launch.task_id, job_lines)
                    except ApiError as exc:
                        if exc.retryable:
                            raise
                    job_lines = []  # delivered, or refused for good: the status matters more
                self.api.post_status(
                    launch.task_id,
                    outcome.status,
                    reason=outcome.reason,
                    exit_code=outcome.exit_code,
                    rank=outcome.rank,
                    lost_peer=outcome.lost_a_peer or None,
                )
                return
            except (ApiError, httpx.HTTPError) as exc:
                if isinstance(exc, ApiError) and not exc.retryable:
                    return
                if time.monotonic() > deadline or self.agent.shutting_down:
                    print(f"tessera worker: gave up reporting {launch.task_id}: {exc}", flush=True)
                    return
                attempt += 1
                print(
                    f"tessera worker: reporting {launch.task_id} failed ({exc}); "
                    f"retry {attempt} in {min(5.0, 0.5 * attempt):.1f} s",
                    flush=True,
                )
                time.sleep(min(5.0, 0.5 * attempt))


def _now() -> str:
    return datetime.now(UTC).isoformat()
