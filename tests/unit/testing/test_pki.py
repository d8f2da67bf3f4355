"""Certificates verify against the CA and carry the identities kube-apiserver reads."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubeop.testing.pki import CertificateAuthority, CertPair, service_account_keys


def test_client_cert_has_user_and_groups(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    pair = ca.issue_to(tmp_path, "u", "alice", organizations=["dev", "ops"], client=True)
    cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["dev", "ops"]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in eku
    cert.verify_directly_issued_by(ca.cert)
    assert oct(pair.key.stat().st_mode & 0o777) == "0o600"


def test_serving_cert_sans(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    pair = ca.issue_to(tmp_path, "s", "kube-apiserver", hosts=["127.0.0.1", "localhost"], server=True)
    cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_ca_round_trip(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    pair = ca.save(tmp_path)
    again = CertificateAuthority.load(CertPair(pair.cert, pair.key))
    leaf = x509.load_pem_x509_certificate(again.issue("bob", client=True)[0])
    leaf.verify_directly_issued_by(ca.cert)


def test_service_account_keys(tmp_path: Path) -> None:
    pair = service_account_keys(tmp_path)
    assert b"PUBLIC KEY" in pair.cert.read_bytes()
    assert b"PRIVATE KEY" in pair.key.read_bytes()
