"""The control plane as the certificate authority of its deployment.

Workers get a certificate naming their party when they register; each task gets a short-lived
one naming its party and attempt, which its ranks present to the other parties' ranks. The
authority's key stays in ``Settings.resolved_ca_dir`` (mode 600), made on first use.
"""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path

from tessera_ml.security.pki import Authority, Identity, cert_pem, expires_at

WORKER_DAYS = 30.0
"""A worker's certificate is renewed whenever it registers (each start)."""
TASK_DAYS = 7.0
"""A task's certificate names its attempt, so it opens nothing once the attempt is over."""


class CertificateService:
    """The deployment's authority, loaded (or made) once, on first use."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._authority: Authority | None = None
        self._lock = threading.Lock()

    @property
    def authority(self) -> Authority:
        with self._lock:
            if self._authority is None:
                self._authority = Authority.load_or_create(self._folder)
            return self._authority

    @property
    def ca_pem(self) -> str:
        return self.authority.cert_pem

    def issue(self, request_pem: str, identity: Identity, days: float) -> tuple[str, datetime]:
        """A PEM certificate for ``identity`` and when it expires; ``CertificateError`` on a
        request that cannot be signed."""
        cert = self.authority.issue(request_pem, identity, days=days)
        return cert_pem(cert), expires_at(cert)
