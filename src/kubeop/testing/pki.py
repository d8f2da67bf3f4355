"""Certificates for the local control plane: one CA, a serving cert, client certs, SA keys.

Made by :mod:`kubeop.core.pki` (ECDSA P-256 throughout); this module keeps them as files.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubeop.core import pki

_VALIDITY = dt.timedelta(days=365)


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


@dataclass(frozen=True)
class CertPair:
    """PEM files of a certificate and its key."""

    cert: Path
    key: Path


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates."""

    def __init__(self, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> None:
        self._key = key
        self.cert = cert

    @classmethod
    def create(cls, common_name: str = "kubeop-local-ca") -> CertificateAuthority:
        key = pki.new_key()
        return cls(key, pki.self_signed_ca(key, common_name, 10 * _VALIDITY, path_length=None))

    @classmethod
    def load(cls, pair: CertPair) -> CertificateAuthority:
        key = serialization.load_pem_private_key(pair.key.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{pair.key} is not an EC private key")
        return cls(key, x509.load_pem_x509_certificate(pair.cert.read_bytes()))

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def save(self, directory: Path, name: str = "ca") -> CertPair:
        pair = CertPair(directory / f"{name}.crt", directory / f"{name}.key")
        directory.mkdir(parents=True, exist_ok=True)
        pair.cert.write_bytes(self.cert_pem)
        _write_private(pair.key, pki.key_pem(self._key))
        return pair

    def issue(
        self,
        common_name: str,
        *,
        organizations: Sequence[str] = (),
        hosts: Sequence[str] = (),
        client: bool = False,
        server: bool = False,
    ) -> tuple[bytes, bytes]:
        """Issue a leaf certificate; returns (cert PEM, key PEM).

        ``organizations`` become Kubernetes groups of a client cert; ``hosts`` (DNS names or IPs)
        become subject alternative names of a serving cert.
        """
        key, cert = pki.issue(
            self._key,
            self.cert,
            common_name,
            _VALIDITY,
            organizations=organizations,
            hosts=hosts,
            client=client,
            server=server,
        )
        return cert.public_bytes(serialization.Encoding.PEM), pki.key_pem(key)

    def issue_to(
        self,
        directory: Path,
        name: str,
        common_name: str,
        *,
        organizations: Sequence[str] = (),
        hosts: Sequence[str] = (),
        client: bool = False,
        server: bool = False,
    ) -> CertPair:
        """Issue a leaf certificate into ``directory/name.crt`` and ``name.key``."""
        cert, key = self.issue(
            common_name, organizations=organizations, hosts=hosts, client=client, server=server
        )
        pair = CertPair(directory / f"{name}.crt", directory / f"{name}.key")
        directory.mkdir(parents=True, exist_ok=True)
        pair.cert.write_bytes(cert)
        _write_private(pair.key, key)
        return pair


def service_account_keys(directory: Path) -> CertPair:
    """A key pair for signing service-account tokens: (public key PEM as ``cert``, private key)."""
    key = pki.new_key()
    pair = CertPair(directory / "sa.pub", directory / "sa.key")
    directory.mkdir(parents=True, exist_ok=True)
    pair.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    _write_private(pair.key, pki.key_pem(key))
    return pair
