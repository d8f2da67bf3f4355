"""Tiny certificate factory for TLS tests (self-signed, EC keys: fast to generate)."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed(
    cn: str = "test",
    *,
    days: int = 1,
    expired: bool = False,
    ca: bool = False,
    validity: tuple[datetime.datetime, datetime.datetime] | None = None,
) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM); ``validity`` (notBefore, notAfter) overrides days/expired."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    start, end = (
        (now - datetime.timedelta(days=3), now - datetime.timedelta(days=1))
        if expired
        else (
            now - datetime.timedelta(minutes=5),
            now + datetime.timedelta(days=days),
        )
    )
    if validity is not None:
        start, end = validity
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    cert = builder.sign(key, hashes.SHA256())
    return (
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )
