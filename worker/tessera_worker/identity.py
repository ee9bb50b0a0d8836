"""A worker's key and certificate, and the credentials it obtains for each task.

The worker makes its key once (``$TESSERA_HOME/identity/<party>/worker.key``, mode 600) and asks
for a certificate each time it registers. For every task it makes a fresh key and asks the
control plane for a certificate naming the task's party and attempt, signing the request with
its own key; that key, the certificate and the task's reporting token are what the task's ranks
get, in a folder of the task that is removed when the task ends. The worker's own key and the
party token never reach a rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tessera_ml.security.pki import (
    Credentials,
    certificate_request,
    key_pem,
    load_key,
    new_key,
    sign,
    write_private,
)
from tessera_worker import rank_files
from tessera_worker.client import ControlPlane


@dataclass(frozen=True)
class TaskCredentials:
    """What one task's ranks are given: TLS files and the task's own reporting token."""

    folder: Path
    tls: Credentials
    token: str

    def remove(self) -> None:
        rank_files.remove_tree(self.folder)


class WorkerIdentity:
    """This worker's key, and its certificate once the control plane issued one."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.name = name
        key_path = folder / "worker.key"
        if key_path.exists():
            self.key = load_key(key_path.read_bytes())
        else:
            self.key = new_key()
            write_private(key_path, key_pem(self.key))
        self.certificate: str | None = None

    def request(self) -> str:
        return certificate_request(self.key, self.name)

    def accept(self, registered: dict[str, Any]) -> None:
        """Keep the certificate and the authority a registration reply carries."""
        certificate = registered.get("certificate")
        if certificate:
            self.certificate = str(certificate)
            (self.folder / "worker.pem").write_text(self.certificate)
        authority = registered.get("ca_certificate")
        if authority:
            (self.folder / "ca.pem").write_text(str(authority))

    def task_credentials(self, api: ControlPlane, task_id: str, folder: Path) -> TaskCredentials:
        """A key made for this task alone, certified by the control plane for its attempt."""
        key = new_key()
        csr = certificate_request(key, f"task {task_id}")
        signature = sign(self.key, csr.encode() + b"\n" + task_id.encode())
        issued = api.task_credentials(task_id, csr, signature)
        tls = Credentials.write(
            folder / "tls", key_pem(key), issued["certificate"], issued["ca_certificate"]
        )
        return TaskCredentials(folder, tls, str(issued["token"]))
