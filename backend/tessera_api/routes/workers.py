"""Workers: a party's machines, registering and beating."""

from __future__ import annotations

from fastapi import APIRouter

from tessera_api.deps import CertificatesDep, PartyCaller, Principal, SessionDep, SettingsDep
from tessera_api.errors import problem_responses
from tessera_api.models import utcnow
from tessera_api.routes.paging import Key, Limit, Name63Query, Offset
from tessera_api.schemas import (
    Heartbeat,
    HeartbeatReply,
    Page,
    WorkerPublic,
    WorkerRegister,
    WorkerRegistered,
)
from tessera_api.services import workers
from tessera_api.views import worker_public

router = APIRouter(prefix="/workers", tags=["workers"])


@router.post("", status_code=201, responses=problem_responses(409, 422))
def register_worker(
    worker_in: WorkerRegister,
    caller: PartyCaller,
    session: SessionDep,
    certificates: CertificatesDep,
) -> WorkerRegistered:
    """Register a worker of the calling party (same hostname: update it), certifying its key."""
    assert caller.party is not None
    worker = workers.register_worker(session, party=caller.party, worker_in=worker_in)
    certificate = None
    if worker_in.csr is not None:
        certificate = workers.certify(session, worker=worker, csr=worker_in.csr, certs=certificates)
    session.commit()
    return WorkerRegistered(
        **worker_public(worker, online=True).model_dump(),
        certificate=certificate,
        ca_certificate=certificates.ca_pem,
    )


@router.get("")
def list_workers(
    caller: Principal,
    session: SessionDep,
    settings: SettingsDep,
    party: Name63Query = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> Page[WorkerPublic]:
    """List workers with online status and unfinished tasks (a party sees only its own)."""
    rows, total = workers.list_workers(
        session, caller=caller, party=party, limit=limit, offset=offset
    )
    now = utcnow()
    after = settings.worker_offline_after_s
    held = workers.unfinished_tasks(session, worker_ids=[w.id for w in rows])
    data = [
        worker_public(
            w,
            online=workers.is_online(w, offline_after_s=after, now=now),
            running_tasks=held.get(w.id, []),
        )
        for w in rows
    ]
    return Page[WorkerPublic](data=data, count=total)


@router.post("/{worker_id}/heartbeat", responses=problem_responses(403, 404))
def heartbeat(
    worker_id: Key, beat: Heartbeat, caller: PartyCaller, session: SessionDep
) -> HeartbeatReply:
    """Record a worker's heartbeat; the reply lists the tasks it must stop."""
    worker = workers.get_worker(session, worker_id=worker_id, caller=caller)
    stop = workers.heartbeat(session, worker=worker, beat=beat)
    session.commit()
    return HeartbeatReply(stop_tasks=stop, server_time=utcnow())
