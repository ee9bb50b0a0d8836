"""What a worker reads and writes about one task: launch description and rendezvous."""

from __future__ import annotations

from sqlalchemy.orm import Session

from tessera_api.certificates import TASK_DAYS, CertificateService
from tessera_api.errors import ApiError, Loc, conflict, forbidden, invalid, not_found
from tessera_api.models import Job, Task, Worker
from tessera_api.schemas import (
    LaunchDescription,
    Rendezvous,
    RendezvousIn,
    TaskCredentials,
    TaskCredentialsIn,
)
from tessera_api.security import Caller, hash_token, new_task_token
from tessera_api.states import TASK_TERMINAL, AttemptStatus, Decision, TaskStatus
from tessera_api.views import rank_backend, rank_roles, resume_point, task_public
from tessera_ml.security.pki import CertificateError, Identity, load_cert, verify


def get_task(session: Session, *, task_id: str, caller: Caller) -> Task:
    """The task, if the caller is the admin or the party running it."""
    task = session.get(Task, task_id)
    if task is None:
        raise not_found("task", task_id)
    if not caller.is_admin and not caller.is_party(task.party_id):
        raise forbidden(f"{caller.name} may not act for task {task_id}")
    return task


def hosted_ranks(task: Task) -> set[int]:
    return {int(r["rank"]) for r in task.ranks}


def check_hosted(task: Task, rank: int, loc: Loc) -> None:
    """422 unless ``task`` hosts ``rank``: a task speaks only for its own ranks."""
    if rank not in hosted_ranks(task):
        raise invalid("rank_not_hosted", f"task {task.id} does not host rank {rank}", loc)


def task_of_job(session: Session, *, job_id: str, task_id: str, caller: Caller) -> Task:
    if caller.task_id is not None and caller.task_id != task_id:
        raise forbidden(f"the credential of task {caller.task_id} may not report for {task_id}")
    task = get_task(session, task_id=task_id, caller=caller)
    if task.attempt.job_id != job_id:
        raise not_found("task", task_id)
    return task


def launch_description(session: Session, *, task: Task) -> LaunchDescription:
    attempt = task.attempt
    job = session.get(Job, attempt.job_id)
    assert job is not None
    backend = rank_backend(task.ranks[0]) if task.ranks else "gloo"
    rendezvous = None
    if attempt.rendezvous_host is not None and attempt.rendezvous_port is not None:
        rendezvous = Rendezvous(
            host=attempt.rendezvous_host,
            port=attempt.rendezvous_port,
            secret=attempt.rendezvous_secret or "",
        )
    approved = any(
        a.party_id == task.party_id and a.decision == Decision.approved for a in job.approvals
    )
    return LaunchDescription(
        task_id=task.id,
        job_id=job.id,
        attempt=attempt.number,
        attempt_id=attempt.id,
        approved=approved,
        algorithm=job.algorithm,
        config=job.config,
        plan=attempt.plan,
        world_size=len(attempt.plan),
        ranks=task_public(task, rank_roles(attempt)).ranks,
        backend=backend,
        rendezvous=rendezvous,
        resume_from=resume_point(attempt),
        status=task.status,
    )


def set_rendezvous(session: Session, *, task: Task, rendezvous: RendezvousIn) -> None:
    """Only the task hosting rank 0 of a running attempt publishes where the world meets."""
    if 0 not in hosted_ranks(task):
        raise conflict("not_rank_zero", f"task {task.id} does not host rank 0")
    attempt = task.attempt
    if AttemptStatus(attempt.status) is not AttemptStatus.running:
        raise conflict("attempt_not_running", f"attempt {attempt.number} is {attempt.status}")
    attempt.rendezvous_host = rendezvous.host
    attempt.rendezvous_port = rendezvous.port
    session.flush()


def issue_credentials(
    session: Session,
    *,
    task: Task,
    request: TaskCredentialsIn,
    certificates: CertificateService,
) -> TaskCredentials:
    """A certificate naming the task's party and attempt, and the task's reporting token.

    Only the worker the task was placed on can ask: the request must be signed with the key of
    that worker's certificate. Asking again replaces the token."""
    if TaskStatus(task.status) in TASK_TERMINAL:
        raise conflict("task_finished", f"task {task.id} is {task.status}")
    attempt = task.attempt
    if AttemptStatus(attempt.status) is not AttemptStatus.running:
        raise conflict("attempt_not_running", f"attempt {attempt.number} is {attempt.status}")
    worker = session.get(Worker, task.worker_id)
    assert worker is not None
    if worker.certificate is None:
        raise conflict(
            "no_worker_certificate",
            f"worker {worker.hostname} registered without a certificate request; restart it",
        )
    signed = request.csr.encode() + b"\n" + task.id.encode()
    if not verify(load_cert(worker.certificate), signed, request.signature):
        raise ApiError(
            403,
            "bad_signature",
            f"the request is not signed with the key of worker {worker.hostname}'s certificate",
        )
    identity = Identity(task.party.name, attempt=attempt.id, worker=worker.id)
    try:
        certificate, expires = certificates.issue(request.csr, identity, TASK_DAYS)
    except CertificateError as exc:
        raise invalid("invalid_csr", str(exc), ("body", "csr")) from exc
    token = new_task_token()
    task.credential_hash = hash_token(token)
    session.flush()
    return TaskCredentials(
        token=token,
        certificate=certificate,
        ca_certificate=certificates.ca_pem,
        expires_at=expires,
    )
