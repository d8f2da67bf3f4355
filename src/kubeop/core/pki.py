"""Making certificates: ECDSA P-256 keys, a self-signed CA and the leaf certificates it signs.

The one builder behind the webhook certificates (:mod:`kubeop.webhook.certs`, and through them
the manager's self-signed HTTPS metrics) and the local control plane's PKI
(:mod:`kubeop.testing.pki`). Pure: nothing is read or written here; callers keep the files.

ECDSA P-256: key generation takes microseconds (RSA 2048 takes tens of ms), and kube-apiserver
accepts EC keys for serving, client authentication and service-account tokens. A CA made
elsewhere may hold an RSA key: leaves are signed with whichever key the CA has.

This module imports ``cryptography`` (several MB): import it only where certificates are made,
never from a module ``import kubeop`` loads.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CLOCK_SKEW", "PrivateKey", "issue", "key_pem", "new_key", "self_signed_ca"]

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
# Clocks of replicas and of the API server differ a little: a certificate made a minute ago
# elsewhere is not "not yet valid" here, so ours start this far in the past.
CLOCK_SKEW = dt.timedelta(minutes=5)
_CA_USAGE = x509.KeyUsage(
    digital_signature=True,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


def new_key() -> ec.EllipticCurvePrivateKey:
    """A new ECDSA P-256 private key."""
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: PrivateKey) -> bytes:
    """``key`` as unencrypted PKCS#8 PEM."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _builder(
    subject: x509.Name, issuer: x509.Name, key: PrivateKey, validity: dt.timedelta
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + validity)
    )


def self_signed_ca(
    key: PrivateKey, common_name: str, validity: dt.timedelta, *, path_length: int | None
) -> x509.Certificate:
    """A self-signed CA certificate for ``key``: basicConstraints CA:TRUE with ``path_length``
    (0: it signs leaves only; None: no limit), keyUsage digitalSignature, keyCertSign, cRLSign."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    return (
        _builder(name, name, key, validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
        .add_extension(_CA_USAGE, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def issue(
    ca_key: PrivateKey,
    ca_cert: x509.Certificate,
    common_name: str,
    validity: dt.timedelta,
    *,
    organizations: Sequence[str] = (),
    hosts: Sequence[str] = (),
    client: bool = False,
    server: bool = False,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new key and a leaf certificate for it, signed by the CA (``ca_key``, ``ca_cert``).

    ``organizations`` become the subject's O (a client certificate's Kubernetes groups);
    ``hosts`` (IP addresses or DNS names) its subjectAltNames; ``client``/``server`` its
    extendedKeyUsage clientAuth/serverAuth (neither: no extendedKeyUsage, any purpose).
    """
    key = new_key()
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    usages = ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []) + (
        [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    )
    builder = _builder(x509.Name(attrs), ca_cert.subject, key, validity).add_extension(
        x509.BasicConstraints(ca=False, path_length=None), critical=True
    )
    if usages:  # an empty extendedKeyUsage is malformed (RFC 5280: at least one purpose)
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName(_general_names(hosts)), critical=False)
    builder = builder.add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
    )
    return key, builder.sign(ca_key, hashes.SHA256())


def _general_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names
