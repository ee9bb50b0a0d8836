"""Workers: registration, heartbeats and the stop list of the heartbeat reply."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tessera_api.certificates import WORKER_DAYS, CertificateService
from tessera_api.errors import forbidden, invalid, not_found
from tessera_api.models import Attempt, Job, Party, Task, Worker, utcnow
from tessera_api.schemas import Heartbeat, WorkerRegister, WorkerTaskPublic
from tessera_api.security import Caller
from tessera_api.services.lifecycle import report_task_status
from tessera_api.states import TASK_TERMINAL, AttemptStatus, JobStatus, TaskStatus
from tessera_ml.security.pki import CertificateError, Identity


def register_worker(session: Session, *, party: Party, worker_in: WorkerRegister) -> Worker:
    """Create the worker, or update the one this party already has on that hostname."""
    worker = session.scalars(
        select(Worker).where(Worker.party_id == party.id, Worker.hostname == worker_in.hostname)
    ).first()
    if worker is None:
        worker = Worker(party_id=party.id, hostname=worker_in.hostname)
        session.add(worker)
    else:
        end_held_tasks(session, worker=worker)
    worker.address = worker_in.address
    worker.cpu_count = worker_in.cpu_count
    worker.memory_bytes = worker_in.memory_bytes
    worker.torch_version = worker_in.torch_version
    worker.accelerators = [a.model_dump() for a in worker_in.accelerators]
    worker.last_heartbeat = utcnow()
    session.flush()
    return worker


def end_held_tasks(session: Session, *, worker: Worker) -> None:
    """A worker registering again has restarted: the tasks it had started ended with it."""
    started = [TaskStatus.starting.value, TaskStatus.running.value]
    held = session.scalars(
        select(Task).where(Task.worker_id == worker.id, Task.status.in_(started))
    ).all()
    for task in held:
        report_task_status(
            session,
            task=task,
            status=TaskStatus.failed,
            reason=f"its worker {worker.hostname} restarted; the task's ranks ended with it",
            exit_code=None,
            rank=None,
        )


def certify(session: Session, *, worker: Worker, csr: str, certs: CertificateService) -> str:
    """Sign the worker's certificate request; the certificate names its party and itself."""
    identity = Identity(worker.party.name, worker=worker.id)
    try:
        certificate, expires = certs.issue(csr, identity, WORKER_DAYS)
    except CertificateError as exc:
        raise invalid("invalid_csr", str(exc), ("body", "csr")) from exc
    worker.certificate = certificate
    worker.certificate_expires_at = expires
    session.flush()
    return certificate


def get_worker(session: Session, *, worker_id: str, caller: Caller) -> Worker:
    worker = session.get(Worker, worker_id)
    if worker is None:
        raise not_found("worker", worker_id)
    if not caller.is_admin and not caller.is_party(worker.party_id):
        raise forbidden(f"{caller.name} may not act for worker {worker_id}")
    return worker


def is_online(worker: Worker, *, offline_after_s: float, now: datetime | None = None) -> bool:
    age = (now or utcnow()) - worker.last_heartbeat
    return age <= timedelta(seconds=offline_after_s)


def online_workers(session: Session, *, party_id: str, offline_after_s: float) -> list[Worker]:
    """A party's workers that beat recently, most recent first."""
    since = utcnow() - timedelta(seconds=offline_after_s)
    rows = session.scalars(
        select(Worker)
        .where(Worker.party_id == party_id, Worker.last_heartbeat >= since)
        .order_by(Worker.last_heartbeat.desc())
    ).all()
    return list(rows)


def list_workers(
    session: Session, *, caller: Caller, party: str | None, limit: int, offset: int
) -> tuple[list[Worker], int]:
    query = select(Worker).join(Party, Worker.party_id == Party.id)
    if caller.party is not None:
        query = query.where(Worker.party_id == caller.party.id)
    if party is not None:
        query = query.where(Party.name == party)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(
        query.order_by(Party.name, Worker.hostname).limit(limit).offset(offset)
    ).all()
    return list(rows), total


def heartbeat(session: Session, *, worker: Worker, beat: Heartbeat) -> list[str]:
    """Record the beat; the tasks this worker runs that must stop."""
    now = utcnow()
    worker.last_heartbeat = now
    if beat.accelerators is not None:
        worker.accelerators = [a.model_dump() for a in beat.accelerators]
    stop: list[str] = []
    for task_id in dict.fromkeys(beat.running_tasks):
        task = session.get(Task, task_id)
        if task is None or task.worker_id != worker.id or must_stop(session, task=task):
            stop.append(task_id)
        else:
            task.last_heartbeat = now
    session.flush()
    return stop


def must_stop(session: Session, *, task: Task) -> bool:
    """A task stops once it is finished, its attempt is over, or its job is being cancelled."""
    if TaskStatus(task.status) in TASK_TERMINAL:
        return True
    attempt = session.get(Attempt, task.attempt_id)
    assert attempt is not None
    if AttemptStatus(attempt.status) is not AttemptStatus.running:
        return True
    job = session.get(Job, attempt.job_id)
    assert job is not None
    return JobStatus(job.status) is JobStatus.cancelling


def unfinished_tasks(
    session: Session, *, worker_ids: Sequence[str]
) -> dict[str, list[WorkerTaskPublic]]:
    """The tasks each worker holds that have not finished, with their job's id and name."""
    rows = session.execute(
        select(Task.worker_id, Task.id, Task.status, Job.id, Job.name)
        .join(Attempt, Task.attempt_id == Attempt.id)
        .join(Job, Attempt.job_id == Job.id)
        .where(Task.worker_id.in_(worker_ids), Task.status.not_in([s.value for s in TASK_TERMINAL]))
        .order_by(Task.created_at)
    ).all()
    held: dict[str, list[WorkerTaskPublic]] = {}
    for worker_id, task_id, status, job_id, job_name in rows:
        held.setdefault(worker_id, []).append(
            WorkerTaskPublic(task_id=task_id, job_id=job_id, job_name=job_name, status=status)
        )
    return held
