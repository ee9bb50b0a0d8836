"""Certificates for workers and tasks, and the task credential that dies with its task."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient

from tessera_api.deps import REPORT_GRACE
from tessera_api.models import Task, utcnow
from tessera_ml.security.pki import (
    certificate_request,
    identity_of,
    load_cert,
    new_key,
    sign,
)
from tests.backend.factories import ADMIN, API, PartyRef, get_job, report, running_job


def register(client: TestClient, party: PartyRef, hostname: str, csr: str | None) -> Any:
    body = {"hostname": hostname, "cpu_count": 2, "memory_bytes": 2**30, "csr": csr}
    response = client.post(f"{API}/workers", json=body, headers=party.auth)
    assert response.status_code == 201, response.text
    return response.json()


def test_a_worker_gets_a_certificate_naming_its_party(client: TestClient) -> None:
    job = running_job(client)
    key = new_key()
    worker = register(client, job.alice, "host-1", certificate_request(key, "host-1"))

    cert = load_cert(worker["certificate"])
    identity = identity_of(cert)
    assert (identity.party, identity.worker, identity.attempt) == (
        job.alice.name,
        worker["id"],
        None,
    )
    assert cert.issuer == load_cert(worker["ca_certificate"]).subject
    listed = client.get(f"{API}/workers", headers=ADMIN).json()["data"]
    assert {w["id"]: w["certificate_expires_at"] for w in listed}[worker["id"]] is not None


def test_a_request_that_is_not_a_csr_is_refused_by_field(client: TestClient) -> None:
    job = running_job(client)
    body = {"hostname": "h", "cpu_count": 1, "memory_bytes": 1, "csr": "not a request"}
    response = client.post(f"{API}/workers", json=body, headers=job.alice.auth)
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_csr"
    assert response.json()["errors"][0]["loc"] == ["body", "csr"]


def _credentials(
    client: TestClient, party: PartyRef, task_id: str, worker_key: Any, task_key: Any
) -> Any:
    csr = certificate_request(task_key, "task")
    signature = sign(worker_key, csr.encode() + b"\n" + task_id.encode())
    return client.post(
        f"{API}/tasks/{task_id}/credentials",
        json={"csr": csr, "signature": signature},
        headers=party.auth,
    )


def test_a_task_credential_reports_for_its_task_only_and_dies_with_it(
    client: TestClient,
) -> None:
    job = running_job(client)
    worker_key = new_key()
    register(client, job.alice, "host-1", certificate_request(worker_key, "host-1"))

    response = _credentials(client, job.alice, job.alice_task, worker_key, new_key())

    assert response.status_code == 200, response.text
    issued = response.json()
    identity = identity_of(load_cert(issued["certificate"]))
    attempt_id = client.get(f"{API}/tasks/{job.alice_task}", headers=job.alice.auth).json()[
        "attempt_id"
    ]
    assert (identity.party, identity.attempt) == (job.alice.name, attempt_id)
    task_auth = {"Authorization": f"Bearer {issued['token']}"}
    point = {"rank": 0, "name": "loss", "step": 1, "value": 0.5}
    own = client.post(
        f"{API}/jobs/{job.id}/metrics",
        json={"task_id": job.alice_task, "points": [point]},
        headers=task_auth,
    )
    assert own.status_code == 204, own.text
    other = client.post(
        f"{API}/jobs/{job.id}/metrics",
        json={"task_id": job.bob_task, "points": [{**point, "rank": 1}]},
        headers=task_auth,
    )
    assert other.status_code == 403
    for method, path in (("GET", "/me"), ("GET", f"/jobs/{job.id}"), ("GET", "/workers")):
        refused = client.request(method, f"{API}{path}", headers=task_auth)
        assert refused.status_code == 403, path
        assert refused.json()["code"] == "task_credential"

    report(client, job.alice, job.alice_task, status="succeeded")
    late = client.post(
        f"{API}/jobs/{job.id}/logs",
        json={"task_id": job.alice_task, "lines": [{"rank": 0, "message": "late"}]},
        headers=task_auth,
    )
    assert late.status_code == 401
    assert late.json()["code"] == "credential_expired"


def test_a_task_credential_ends_an_hour_after_its_attempt_even_if_the_task_never_does(
    client: TestClient,
) -> None:
    """Bob's rank fails the attempt; alice's task is still ``running`` (her worker never says
    otherwise). Her credential delivers what came late for an hour, then ends."""
    job = running_job(client)
    worker_key = new_key()
    register(client, job.alice, "host-1", certificate_request(worker_key, "host-1"))
    issued = _credentials(client, job.alice, job.alice_task, worker_key, new_key()).json()
    task_auth = {"Authorization": f"Bearer {issued['token']}"}
    report(client, job.bob, job.bob_task, status="failed", reason="boom", exit_code=1)
    assert get_job(client, job.id)["status"] == "failed"

    def post_line() -> Any:
        line = {"rank": 0, "message": "late"}
        body = {"task_id": job.alice_task, "lines": [line]}
        return client.post(f"{API}/jobs/{job.id}/logs", json=body, headers=task_auth)

    assert post_line().status_code == 204
    app: Any = client.app
    with app.state.session_factory() as session:
        attempt = session.get(Task, job.alice_task).attempt
        attempt.finished_at = utcnow() - REPORT_GRACE - timedelta(minutes=1)
        session.commit()
    late = post_line()
    assert late.status_code == 401 and late.json()["code"] == "credential_expired"
    assert "ended with attempt 1 (failed)" in late.json()["detail"]


def test_task_credentials_need_the_key_of_the_tasks_worker(client: TestClient) -> None:
    job = running_job(client)
    stranger_key = new_key()
    # the running job's tasks sit on workers registered without a certificate request
    unsigned = _credentials(client, job.alice, job.alice_task, stranger_key, new_key())
    assert unsigned.status_code == 409
    assert unsigned.json()["code"] == "no_worker_certificate"

    register(client, job.alice, "host-1", certificate_request(new_key(), "host-1"))
    forged = _credentials(client, job.alice, job.alice_task, stranger_key, new_key())
    assert forged.status_code == 403
    assert forged.json()["code"] == "bad_signature"


def test_the_rendezvous_secret_is_shown_to_the_attempts_workers_only(client: TestClient) -> None:
    job = running_job(client)
    secret = client.get(f"{API}/tasks/{job.alice_task}", headers=job.alice.auth).json()[
        "rendezvous"
    ]
    assert secret is None  # not published yet
    client.post(
        f"{API}/tasks/{job.alice_task}/rendezvous",
        json={"host": "10.0.0.5", "port": 29500},
        headers=job.alice.auth,
    )
    launch = client.get(f"{API}/tasks/{job.alice_task}", headers=job.alice.auth).json()
    secret = launch["rendezvous"]["secret"]
    seen = [
        client.get(f"{API}/jobs/{job.id}", headers=ADMIN).text,
        client.get(f"{API}/jobs/{job.id}/transitions", headers=ADMIN).text,
        client.get(f"{API}/jobs/{job.id}/events?once=true", headers=ADMIN).text,
        client.get(f"{API}/jobs", headers=ADMIN).text,
    ]
    assert all(secret not in text for text in seen)
    assert get_job(client, job.id)["status"] == "running"
