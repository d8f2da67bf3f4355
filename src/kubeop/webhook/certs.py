"""Certificates for serving webhooks locally: a CA and a serving certificate for 127.0.0.1.

The API server needs the CA (the configurations' ``caBundle``) and the webhook server needs the
serving pair, written as ``tls.crt`` / ``tls.key`` (controller-runtime's names, and a
kubernetes.io/tls Secret's keys) next to ``ca.crt``. :func:`local_certificates` reuses what a
directory already holds while it is valid for the hosts and for another day, so restarting a
local operator does not invalidate the caBundle already registered with the cluster.

ECDSA P-256: key generation takes microseconds, and kube-apiserver accepts it. Cluster
deployments get their certificates from cert-manager, or keep them in a Secret with
:mod:`kubeop.webhook.rotator`, which makes them with :func:`make_ca` and :func:`make_serving`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "DEFAULT_CERT_DIR",
    "KeyPair",
    "LocalCertificates",
    "issue_serving",
    "local_certificates",
    "make_ca",
    "make_serving",
]

CERT_NAME, KEY_NAME, CA_NAME, CA_KEY_NAME = "tls.crt", "tls.key", "ca.crt", "ca.key"
# controller-runtime's default, so a Secret mounted there works the same with both
DEFAULT_CERT_DIR = Path(tempfile.gettempdir()) / "k8s-webhook-server" / "serving-certs"


@dataclass(frozen=True)
class LocalCertificates:
    directory: Path
    ca_pem: bytes

    @property
    def cert_file(self) -> Path:
        return self.directory / CERT_NAME

    @property
    def key_file(self) -> Path:
        return self.directory / KEY_NAME


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write via a temporary file of its own and rename, so a reader never sees half a file and
    writers at once (two local operators on one directory) never take each other's file away."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass(frozen=True)
class KeyPair:
    """A private key and its certificate, both PEM (the key stays out of the repr)."""

    key_pem: bytes = field(repr=False)
    cert_pem: bytes

    @property
    def cert(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def key(self) -> ec.EllipticCurvePrivateKey:
        loaded = serialization.load_pem_private_key(self.key_pem, None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError("the key is not an EC key")
        return loaded


def make_ca(validity: dt.timedelta = dt.timedelta(days=3650)) -> KeyPair:
    """A new self-signed CA (in memory)."""
    key, cert = _ca(validity)
    return KeyPair(_pem(key), cert.public_bytes(serialization.Encoding.PEM))


def make_serving(
    ca: KeyPair, hosts: Sequence[str], validity: dt.timedelta = dt.timedelta(days=365)
) -> KeyPair:
    """A new serving certificate for ``hosts`` (IP addresses or DNS names) signed by ``ca``."""
    key, cert = _serving(ca.key(), ca.cert, hosts, validity)
    return KeyPair(_pem(key), cert.public_bytes(serialization.Encoding.PEM))


def _ca(validity: dt.timedelta) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubeop-webhook-ca")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _serving(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    hosts: Sequence[str],
    validity: dt.timedelta,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    if not hosts:
        raise ValueError("a serving certificate needs at least one host")
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def _new_ca(directory: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key, cert = _ca(dt.timedelta(days=3650))
    _write(directory / CA_KEY_NAME, _pem(key), 0o600)
    _write(directory / CA_NAME, cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def issue_serving(
    directory: str | os.PathLike[str],
    hosts: Sequence[str] = ("127.0.0.1",),
    *,
    days: float = 365,
) -> LocalCertificates:
    """A new serving certificate for ``hosts`` from the directory's CA (created if missing).

    Rotation is this call: the webhook server notices the new files on its next handshake.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        loaded = serialization.load_pem_private_key((directory / CA_KEY_NAME).read_bytes(), None)
        ca_cert = x509.load_pem_x509_certificate((directory / CA_NAME).read_bytes())
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise ValueError("not an EC key")
        ca_key = loaded
    except (OSError, ValueError):
        ca_key, ca_cert = _new_ca(directory)
    key, cert = _serving(ca_key, ca_cert, hosts, dt.timedelta(days=days))
    # The key first: a server that sees the new certificate with the old key fails to load the
    # pair and keeps serving the old one until both are in place.
    _write(directory / KEY_NAME, _pem(key), 0o600)
    _write(directory / CERT_NAME, cert.public_bytes(serialization.Encoding.PEM))
    return LocalCertificates(directory, ca_cert.public_bytes(serialization.Encoding.PEM))


def local_certificates(
    directory: str | os.PathLike[str], hosts: Sequence[str] = ("127.0.0.1",)
) -> LocalCertificates:
    """The directory's CA and serving certificate, issued when missing, expiring or for other hosts."""
    directory = Path(directory)
    try:
        ca_pem = (directory / CA_NAME).read_bytes()
        cert = x509.load_pem_x509_certificate((directory / CERT_NAME).read_bytes())
        (directory / KEY_NAME).stat()
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        have = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
        have |= set(san.get_values_for_type(x509.DNSName))
        fresh = cert.not_valid_after_utc > dt.datetime.now(dt.UTC) + dt.timedelta(days=1)
        if fresh and set(hosts) <= have:
            return LocalCertificates(directory, ca_pem)
    except (OSError, ValueError, x509.ExtensionNotFound):
        pass
    return issue_serving(directory, hosts)
