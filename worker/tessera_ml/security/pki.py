"""Keys, certificate requests and the certificates of a Tessera deployment (no torch).

The control plane is the certificate authority of its deployment. A worker makes its own key and
sends a certificate request; the control plane answers with a certificate that names the worker's
party, and for a task also the attempt it belongs to. Identities travel as subject alternative
names of the form ``urn:tessera:<kind>:<value>``; host names play no part, so the same
certificate works whatever address a worker has.
"""

from __future__ import annotations

import base64
import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

URN = "urn:tessera:"
CA_DAYS = 3650


class CertificateError(ValueError):
    """A request or certificate that cannot be used; the message says why."""


@dataclass(frozen=True)
class Identity:
    """Who a certificate speaks for: a party, and for a task's ranks the attempt."""

    party: str
    attempt: str | None = None
    worker: str | None = None

    def uris(self) -> list[str]:
        names = [f"{URN}party:{self.party}"]
        if self.attempt is not None:
            names.append(f"{URN}attempt:{self.attempt}")
        if self.worker is not None:
            names.append(f"{URN}worker:{self.worker}")
        return names

    @classmethod
    def from_uris(cls, uris: list[str]) -> Identity:
        found: dict[str, str] = {}
        for uri in uris:
            if uri.startswith(URN):
                kind, _, value = uri[len(URN) :].partition(":")
                found.setdefault(kind, value)
        if "party" not in found:
            raise CertificateError("the certificate names no Tessera party")
        return cls(found["party"], found.get("attempt"), found.get("worker"))


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertificateError("expected an elliptic-curve private key")
    return key


def certificate_request(key: ec.EllipticCurvePrivateKey, common_name: str) -> str:
    """A PEM certificate request; the authority decides the names, not the request."""
    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64])]))
        .sign(key, hashes.SHA256())
    )
    return request.public_bytes(serialization.Encoding.PEM).decode()


def cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def load_cert(pem: str | bytes) -> x509.Certificate:
    data = pem.encode() if isinstance(pem, str) else pem
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError as exc:
        raise CertificateError(f"not a PEM certificate: {exc}") from exc


def identity_of(cert: x509.Certificate) -> Identity:
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound as exc:
        raise CertificateError("the certificate has no subject alternative names") from exc
    return Identity.from_uris(names.get_values_for_type(x509.UniformResourceIdentifier))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Authority:
    """A certificate authority: its key and its self-signed certificate."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        self.key = key
        self.cert = cert

    @property
    def cert_pem(self) -> str:
        return cert_pem(self.cert)

    @classmethod
    def create(cls, name: str = "Tessera deployment CA") -> Authority:
        key = new_key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = _now()
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @classmethod
    def load_or_create(cls, folder: Path) -> Authority:
        """The authority kept in ``folder`` (``ca.key``, mode 600, and ``ca.pem``), made once."""
        key_path, cert_path = folder / "ca.key", folder / "ca.pem"
        if key_path.exists() and cert_path.exists():
            return cls(load_key(key_path.read_bytes()), load_cert(cert_path.read_bytes()))
        authority = cls.create()
        folder.mkdir(parents=True, exist_ok=True)
        write_private(key_path, key_pem(authority.key))
        cert_path.write_text(authority.cert_pem)
        return authority

    def issue(self, request_pem: str, identity: Identity, *, days: float) -> x509.Certificate:
        """Sign a request for ``identity``: usable as TLS client and server, ``days`` long."""
        try:
            request = x509.load_pem_x509_csr(request_pem.encode())
        except ValueError as exc:
            raise CertificateError(f"not a PEM certificate request: {exc}") from exc
        if not request.is_signature_valid:
            raise CertificateError("the certificate request's signature is not valid")
        public = request.public_key()
        if not isinstance(public, ec.EllipticCurvePublicKey):
            raise CertificateError("the request must carry an elliptic-curve key")
        now = _now()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, identity.party)])
        names = [x509.UniformResourceIdentifier(u) for u in identity.uris()]
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH]
                ),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )


def write_private(path: Path, data: bytes) -> None:
    """Write a secret readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


@dataclass(frozen=True)
class Credentials:
    """The files a TLS endpoint needs: its key and certificate, and the authority's."""

    key: Path
    cert: Path
    ca: Path

    @classmethod
    def write(cls, folder: Path, key: bytes, cert: str, ca: str) -> Credentials:
        folder.mkdir(parents=True, exist_ok=True)
        paths = cls(folder / "key.pem", folder / "cert.pem", folder / "ca.pem")
        write_private(paths.key, key)
        paths.cert.write_text(cert)
        paths.ca.write_text(ca)
        return paths


def issue_credentials(
    authority: Authority, identity: Identity, folder: Path, *, days: float = 1.0
) -> Credentials:
    """A fresh key and a certificate for ``identity`` written to ``folder`` (tests, benches)."""
    key = new_key()
    cert = authority.issue(certificate_request(key, identity.party), identity, days=days)
    return Credentials.write(folder, key_pem(key), cert_pem(cert), authority.cert_pem)


def sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> str:
    """A base64 ECDSA signature: proof that a request comes from the holder of ``key``."""
    return base64.b64encode(key.sign(data, ec.ECDSA(hashes.SHA256()))).decode()


def verify(cert: x509.Certificate, data: bytes, signature: str) -> bool:
    """Whether ``signature`` over ``data`` was made with the key ``cert`` certifies."""
    public = cert.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey):
        return False
    try:
        public.verify(base64.b64decode(signature, validate=True), data, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True


def expires_at(cert: x509.Certificate) -> dt.datetime:
    return cert.not_valid_after_utc
