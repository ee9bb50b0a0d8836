"""The real dispatcher: places queued jobs on online workers and sends their tasks.

``submit`` queues a job and tries to place it at once; a background loop retries every queued
job (so a job waiting for a party's worker starts when one comes online), fails the attempt of a
running job whose worker went offline or never started its task in time, and cancels the tasks
a cancelling job's offline worker can no longer stop. Messages are sent only after the
transaction that created their tasks committed.

With several replicas of the control plane on one database, each runs this loop but only the
holder of the scheduler ``Lease`` does anything in it; the others queue the jobs submitted to
them and wait to take over.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from tessera_api.errors import ApiError
from tessera_api.models import Attempt, Job, Party, Task, Worker
from tessera_api.models import utcnow as _utcnow
from tessera_api.scheduling.broker import TaskSender
from tessera_api.scheduling.lease import Lease
from tessera_api.scheduling.placement import DeviceRules, Waiting, WorkerView, place
from tessera_api.services.approvals import approved
from tessera_api.services.lifecycle import (
    current_attempt,
    fail_attempt_by,
    lock_job,
    queue_job,
    queued_jobs,
    report_task_status,
    set_queued_reason,
    start_attempt,
)
from tessera_api.states import TASK_TERMINAL, AttemptStatus, JobStatus, TaskStatus
from tessera_ml.registry import all_specs
from tessera_ml.spec import AlgorithmSpec, JobDevice

log = logging.getLogger("tessera.scheduler")


@dataclass(frozen=True)
class Outgoing:
    party: str
    worker_id: str
    job_id: str
    attempt: int
    task_id: str


class Scheduler:
    """A ``tessera_api.dispatch.Dispatcher`` that runs jobs on workers through Celery."""

    def __init__(
        self,
        session_factory: Callable[[], Session],
        sender: TaskSender,
        *,
        offline_after_s: float,
        start_timeout_s: float = 300.0,
        interval_s: float = 1.0,
        lost_worker_after_s: float = 5.0,
        blame_window_s: float = 8.0,
        lease: Lease | None = None,
        specs: Mapping[str, AlgorithmSpec] | None = None,
    ) -> None:
        self._sessions = session_factory
        self._specs = all_specs() if specs is None else specs
        self._sender = sender
        self.offline_after_s = offline_after_s
        self.start_timeout_s = start_timeout_s
        self.interval_s = interval_s
        self.lost_worker_after_s = lost_worker_after_s
        self.blame_window_s = blame_window_s
        self.hearing_since = _utcnow()
        """Since when this scheduler could hear heartbeats: silence before it does not count,
        so a restart of the control plane does not take every worker for lost."""
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsent: list[Outgoing] = []
        self._lease = lease
        self.leading = lease is None
        self._resend_assigned = False
        """Send again the messages of tasks still ``assigned``: whoever scheduled before may
        have died between committing them and sending (workers run a task once)."""
        """Whether this scheduler acts: always without a lease, else while it holds it."""

    # -- Dispatcher ------------------------------------------------------------------------
    def submit(self, session: Session, *, job_id: str) -> None:
        with self._lock:
            job = session.get(Job, job_id)
            if job is None or JobStatus(job.status) is not JobStatus.pending or not approved(job):
                return
            queue_job(session, job_id=job_id)
            # a replica that is not the scheduler only queues: the holder places it at its pass
            outgoing = self._try_place(session, job) if self.leading else []
            session.commit()
        self._send(outgoing)

    def cancel(self, session: Session, *, job_id: str) -> None:
        self._wake.set()

    # -- the loop --------------------------------------------------------------------------
    def start(self) -> None:
        self.hearing_since = _utcnow()
        self._resend_assigned = True
        self._hold_lease()
        self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._lease is not None and self.leading:
            self.leading = False
            try:
                self._lease.release()
            except Exception:
                log.exception("could not give the scheduler lease back; it lapses by itself")

    def _loop(self) -> None:
        while not self._closed.is_set():
            try:
                self.tick()
            except Exception:
                log.exception("scheduler pass failed")
            self._wake.wait(self.interval_s)
            self._wake.clear()

    def tick(self) -> None:
        """One pass: place queued jobs, fail tasks lost with their worker or never started."""
        if not self._hold_lease():
            return
        with self._lock, self._sessions() as session:
            outgoing: list[Outgoing] = []
            if self._resend_assigned:
                outgoing += self._assigned(session)
                self._resend_assigned = False
            for job in queued_jobs(session):
                outgoing += self._try_place(session, job)
            self._blame_lost_peers(session)
            self._fail_lost_tasks(session)
            session.commit()
            unique = {o.task_id: o for o in self._unsent + outgoing}
            outgoing, self._unsent = list(unique.values()), []
        self._send(outgoing)

    # -- internals -------------------------------------------------------------------------
    def _hold_lease(self) -> bool:
        if self._lease is None:
            return True
        try:
            held = self._lease.hold()
        except Exception:
            log.exception("could not renew the scheduler lease")
            held = False
        with self._lock:
            if held and not self.leading:
                # workers were heard by whoever scheduled before: give them time to be heard here
                self.hearing_since = _utcnow()
                self._resend_assigned = True
                log.info("this replica (%s) is the scheduler now", self._lease.holder)
            elif self.leading and not held:
                log.warning("this replica (%s) lost the scheduler lease", self._lease.holder)
            self.leading = held
        return held

    def _online_workers(self, session: Session) -> list[WorkerView]:
        since = _utcnow() - timedelta(seconds=self.offline_after_s)
        rows = session.execute(
            select(Worker, Party.name)
            .join(Party, Worker.party_id == Party.id)
            .where(Worker.last_heartbeat >= since, Party.disabled.is_(False))
        ).all()
        busy_ranks: dict[str, int] = defaultdict(int)
        busy_gpus: dict[str, set[int]] = defaultdict(set)
        for task in self._live_tasks(session):
            for r in task.ranks:
                busy_ranks[task.worker_id] += 1
                device = str(r.get("device", "cpu"))
                if device.startswith("cuda:"):
                    busy_gpus[task.worker_id].add(int(device.split(":")[1]))
        return [
            WorkerView(
                id=w.id,
                party=name,
                cpu_count=w.cpu_count,
                accelerators=list(w.accelerators or []),
                busy_ranks=busy_ranks[w.id],
                busy_gpus=frozenset(busy_gpus[w.id]),
            )
            for w, name in rows
        ]

    def _live_tasks(self, session: Session) -> list[Task]:
        live = [s.value for s in TaskStatus if s not in TASK_TERMINAL]
        return list(session.scalars(select(Task).where(Task.status.in_(live))).all())

    def _assigned(self, session: Session) -> list[Outgoing]:
        rows = session.execute(
            select(Task, Attempt.job_id, Attempt.number)
            .join(Attempt, Task.attempt_id == Attempt.id)
            .where(Task.status == TaskStatus.assigned.value)
        ).all()
        return [Outgoing(t.party.name, t.worker_id, job_id, n, t.id) for t, job_id, n in rows]

    def _try_place(self, session: Session, job: Job) -> list[Outgoing]:
        attempt = current_attempt(job)
        result = place(attempt.plan, self._online_workers(session), self._device_rules(job))
        if isinstance(result, Waiting):
            set_queued_reason(session, job_id=job.id, reason=result.reason)
            return []
        try:
            # start_attempt checks everything before it changes anything
            started = start_attempt(session, job_id=job.id, placements=result)
        except ApiError as exc:
            log.warning("job %s could not start: %s", job.id, exc.detail)
            if JobStatus(job.status) is JobStatus.queued:
                set_queued_reason(session, job_id=job.id, reason=f"cannot start: {exc.detail}")
            return []
        return [
            Outgoing(t.party.name, t.worker_id, job.id, started.number, t.id) for t in started.tasks
        ]

    def _device_rules(self, job: Job) -> DeviceRules:
        spec = self._specs.get(job.algorithm)
        if spec is None:
            return DeviceRules(roles={}, device="cpu")
        return DeviceRules(
            roles={r.name: r for r in spec.roles},
            device=cast(JobDevice, job.device),
            one_device_type=spec.one_device_type,
        )

    def _fail_lost_tasks(self, session: Session) -> None:
        """End the live tasks whose worker went offline or never started them in time."""
        for task in self._live_tasks(session):
            if self._lost_reason(session, task) is None:
                continue
            attempt = session.get(Attempt, task.attempt_id)
            assert attempt is not None
            job = lock_job(session, job_id=attempt.job_id)
            reason = self._lost_reason(session, task)  # read again under the job's lock
            if reason is None:
                continue
            stopping = JobStatus(job.status) is JobStatus.cancelling
            try:
                report_task_status(
                    session,
                    task=task,
                    status=TaskStatus.cancelled if stopping else TaskStatus.failed,
                    reason=reason,
                    exit_code=None,
                    rank=None,
                )
            except ApiError as exc:  # the task ended meanwhile
                log.info("task %s not ended: %s", task.id, exc.detail)

    def silence(self, worker: Worker) -> timedelta:
        """How long the worker has not been heard while this scheduler could hear it."""
        return _utcnow() - max(worker.last_heartbeat, self.hearing_since)

    def _blame_lost_peers(self, session: Session) -> None:
        """Settle attempts in which a rank reported a lost peer: fail the task of a worker that
        went silent meanwhile (the cause), else, after the window, fail with that report."""
        reports = session.scalars(
            select(Task)
            .join(Attempt, Task.attempt_id == Attempt.id)
            .where(
                Task.lost_peer.is_(True),
                Task.status == TaskStatus.failed.value,
                Attempt.status == AttemptStatus.running.value,
            )
        ).all()
        for report in reports:
            job = lock_job(session, job_id=report.attempt.job_id)
            attempt = report.attempt
            if AttemptStatus(attempt.status) is not AttemptStatus.running:
                continue
            silent = [
                t
                for t in attempt.tasks
                if TaskStatus(t.status) not in TASK_TERMINAL
                and (w := session.get(Worker, t.worker_id)) is not None
                and self.silence(w) > timedelta(seconds=self.lost_worker_after_s)
            ]
            if silent:
                worker = session.get(Worker, silent[0].worker_id)
                assert worker is not None
                report_task_status(
                    session,
                    task=silent[0],
                    status=TaskStatus.failed,
                    reason=f"its worker {worker.hostname} stopped answering",
                    exit_code=None,
                    rank=None,
                )
            elif report.finished_at is not None and _utcnow() - report.finished_at > timedelta(
                seconds=self.blame_window_s
            ):
                fail_attempt_by(session, job=job, task=report)

    def _lost_reason(self, session: Session, task: Task) -> str | None:
        """Why a live task can no longer run, or None while it may."""
        worker = session.get(Worker, task.worker_id)
        if worker is None or TaskStatus(task.status) in TASK_TERMINAL:
            return None
        now = _utcnow()
        if self.silence(worker) > timedelta(seconds=self.offline_after_s):
            return f"worker {worker.hostname} went offline"
        waited = now - max(task.created_at, self.hearing_since)
        overdue = waited > timedelta(seconds=self.start_timeout_s)
        if TaskStatus(task.status) is TaskStatus.assigned and overdue:
            return (
                f"worker {worker.hostname} of party {task.party.name} did not start its task "
                f"within {self.start_timeout_s:g} s"
            )
        return None

    def _send(self, outgoing: list[Outgoing]) -> None:
        """Publish each message; one the broker refused is tried again on the next pass."""
        for o in outgoing:
            try:
                self._sender.send(
                    party=o.party,
                    worker_id=o.worker_id,
                    job_id=o.job_id,
                    attempt=o.attempt,
                    task_id=o.task_id,
                )
            except Exception:
                log.exception("could not send task %s to party %s", o.task_id, o.party)
                with self._lock:
                    self._unsent.append(o)
