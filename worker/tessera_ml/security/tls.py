"""Mutually authenticated TLS 1.3 between the ranks of one attempt.

Both ends present a certificate from the deployment's authority (``pki``). Host names are not
checked: a peer is accepted for the identity its certificate names, which must be the party
the rank plan says it plays and, for ranks, the same attempt.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

from cryptography import x509

from tessera_ml.security.pki import CertificateError, Credentials, Identity, identity_of


class PeerRefused(ConnectionError):
    """The other end is not who it must be (no certificate, another party, another attempt)."""


def _context(purpose: int, credentials: Credentials) -> ssl.SSLContext:
    context = ssl.SSLContext(purpose)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_verify_locations(cafile=str(credentials.ca))
    context.load_cert_chain(certfile=str(credentials.cert), keyfile=str(credentials.key))
    context.verify_mode = ssl.CERT_REQUIRED
    if purpose == ssl.PROTOCOL_TLS_CLIENT:
        context.check_hostname = False
    else:
        context.num_tickets = 0  # peers never resume; no ticket for a reader that never reads
    return context


@dataclass
class TlsConfig:
    """This rank's TLS contexts and the attempt its peers must belong to."""

    credentials: Credentials
    attempt: str | None = None

    def __post_init__(self) -> None:
        self.server = _context(ssl.PROTOCOL_TLS_SERVER, self.credentials)
        self.client = _context(ssl.PROTOCOL_TLS_CLIENT, self.credentials)

    def accept(self, sock: socket.socket, timeout_s: float) -> ssl.SSLSocket:
        """The server side of a handshake on an accepted connection, within ``timeout_s``."""
        sock.settimeout(timeout_s)
        tls = self.server.wrap_socket(sock, server_side=True)
        self._same_attempt(tls)
        return tls

    def connect(self, address: tuple[str, int], party: str, timeout_s: float) -> ssl.SSLSocket:
        """A connection to a listener that must prove it is ``party`` in this attempt."""
        raw = socket.create_connection(address, timeout=timeout_s)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tls = self.client.wrap_socket(raw)
        except BaseException:
            raw.close()
            raise
        try:
            self.expect(tls, party)
        except BaseException:
            tls.close()
            raise
        return tls

    def expect(self, tls: ssl.SSLSocket, party: str) -> Identity:
        """The peer's identity, which must be ``party`` in this attempt."""
        identity = self._same_attempt(tls)
        if identity.party != party:
            raise PeerRefused(
                f"the peer holds a certificate of party {identity.party!r}, not {party!r}"
            )
        return identity

    def _same_attempt(self, tls: ssl.SSLSocket) -> Identity:
        identity = peer_identity(tls)
        if self.attempt is not None and identity.attempt != self.attempt:
            raise PeerRefused(
                f"the peer's certificate is for attempt {identity.attempt!r}, not this one"
            )
        return identity


def peer_identity(tls: ssl.SSLSocket) -> Identity:
    der = tls.getpeercert(binary_form=True)
    if der is None:
        raise PeerRefused("the peer presented no certificate")
    try:
        return identity_of(x509.load_der_x509_certificate(der))
    except (CertificateError, ValueError) as exc:
        raise PeerRefused(f"the peer's certificate is not usable: {exc}") from exc
