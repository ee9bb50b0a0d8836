"""Consent: a job runs on a party's workers only after that party approved it.

A job is ``pending`` until every party named in it approved; its ``status_reason`` names the
parties still to answer. The party that creates a job approves it by doing so, and a party's
policy may approve the jobs of named creators (other parties, or ``admin``) unasked. One
rejection ends the job as ``rejected`` with the party and its reason.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.orm import Session

from tessera_api.errors import ApiError, conflict, forbidden, not_found
from tessera_api.models import Approval, Job, Party, utcnow
from tessera_api.security import Caller
from tessera_api.services import policy
from tessera_api.services.history import move_attempt, move_job, record_decision, record_event
from tessera_api.services.lifecycle import current_attempt, lock_job
from tessera_api.states import ATTEMPT_TERMINAL, AttemptStatus, Decision, JobStatus
from tessera_ml.spec import AlgorithmSpec


def creator_name(caller: Caller) -> str:
    """How a policy names the creator of a job: the party's name, or ``admin``."""
    return policy.ADMIN if caller.party is None else caller.party.name


def open_approvals(session: Session, *, job: Job, parties: list[Party], caller: Caller) -> None:
    """One approval per party of a new job; the creator's and its policies' answered at once."""
    creator = creator_name(caller)
    for party in parties:
        approval = Approval(party_id=party.id, party=party, decision=Decision.pending.value)
        job.approvals.append(approval)
        if caller.is_party(party.id):
            by, reason = party.name, "created the job"
        elif policy.approves_unasked(party, creator):
            by, reason = "policy", f"approves jobs from {creator}"
        else:
            continue
        _decide(approval, Decision.approved, by=by, reason=reason)
        record_decision(
            session, job_id=job.id, party=party, decision=approval.decision, by=by, reason=reason
        )
    job.status_reason = waiting_reason(job)
    session.flush()


def waiting_for(job: Job) -> list[str]:
    """The parties that have not answered yet, in the job's order."""
    return [a.party.name for a in job.approvals if a.decision == Decision.pending]


def approved(job: Job) -> bool:
    return all(a.decision == Decision.approved for a in job.approvals)


def waiting_reason(job: Job) -> str:
    names = waiting_for(job)
    if not names:
        return ""
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    return f"waiting for approval by {listed}"


def decide(
    session: Session,
    *,
    job: Job,
    caller: Caller,
    approve: bool,
    reason: str,
    specs: Mapping[str, AlgorithmSpec],
) -> Job:
    """The calling party approves or rejects ``job``; 409 once the job has left ``pending``."""
    if caller.party is None:
        raise forbidden("only a party holding a role in the job can approve or reject it")
    job = lock_job(session, job_id=job.id)
    approval = next((a for a in job.approvals if a.party_id == caller.party.id), None)
    if approval is None:
        raise not_found("job", job.id)
    if JobStatus(job.status) is not JobStatus.pending:
        raise conflict(
            "approval_closed",
            f"job {job.id} is {job.status}; approvals are decided while it is pending",
        )
    if approve:
        spec = specs.get(job.algorithm)
        if spec is not None:
            found = policy.refusals([caller.party], spec=spec, config=spec.parse_config(job.config))
            if found:
                raise ApiError(409, "policy_forbids", found[0].detail, found[0].errors)
    to = Decision.approved if approve else Decision.rejected
    if approval.decision != to:
        _decide(approval, to, by=caller.party.name, reason=reason)
        record_decision(
            session,
            job_id=job.id,
            party=caller.party,
            decision=to.value,
            by=caller.party.name,
            reason=reason,
        )
    if to is Decision.rejected:
        _end_rejected(session, job=job, party=caller.party, reason=reason)
    else:
        _update_reason(session, job=job)
    session.flush()
    return job


def reopen(
    session: Session, *, job: Job, caller: Caller, specs: Mapping[str, AlgorithmSpec]
) -> None:
    """A retry is a new run on every party's workers. The parties' policies must still allow
    the job (409 ``policy_forbids`` otherwise: a policy may have changed since), and each
    party's consent is asked again, except the retrying party's own and that of a party whose
    policy approves the retrying party's jobs unasked and which did not reject the job. A party
    that approved the first run by hand, or cancelled it, is not taken to agree to another."""
    spec = specs.get(job.algorithm)
    if spec is not None:
        parties = [a.party for a in job.approvals]
        found = policy.refusals(parties, spec=spec, config=spec.parse_config(job.config))
        if found:
            raise ApiError(409, "policy_forbids", found[0].detail, found[0].errors)
    creator = creator_name(caller)
    for approval in job.approvals:
        party = approval.party
        if caller.is_party(party.id):
            by, reason = party.name, "retried the job"
        elif approval.decision != Decision.rejected and policy.approves_unasked(party, creator):
            by, reason = "policy", f"approves jobs from {creator}"
        else:  # asked again, and always after a rejection: a policy does not overrule it
            approval.decision = Decision.pending.value
            approval.decided_by = None
            approval.decided_at = None
            approval.reason = ""
            continue
        _decide(approval, Decision.approved, by=by, reason=reason)
        record_decision(
            session, job_id=job.id, party=party, decision=approval.decision, by=by, reason=reason
        )
    _update_reason(session, job=job)


def _decide(approval: Approval, to: Decision, *, by: str, reason: str) -> None:
    approval.decision = to.value
    approval.decided_by = by
    approval.reason = reason
    approval.decided_at = utcnow()


def _update_reason(session: Session, *, job: Job) -> None:
    reason = waiting_reason(job) or "approved by every party"
    if job.status_reason != reason:
        job.status_reason = reason
        record_event(
            session, job_id=job.id, kind="job.reason", data={"status": job.status, "reason": reason}
        )


def _end_rejected(session: Session, *, job: Job, party: Party, reason: str) -> None:
    why = f"rejected by {party.name}" + (f": {reason}" if reason else "")
    attempt = current_attempt(job)
    if AttemptStatus(attempt.status) not in ATTEMPT_TERMINAL:
        move_attempt(session, attempt=attempt, to=AttemptStatus.cancelled, reason=why)
    move_job(session, job=job, to=JobStatus.rejected, reason=why)
