"""The one certificate builder: what a CA and a leaf carry."""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubeop.core import pki

DAY = dt.timedelta(days=1)


def test_a_ca_may_sign_with_the_path_length_asked_for() -> None:
    key = pki.new_key()
    for path_length in (0, None):
        ca = pki.self_signed_ca(key, "test-ca", DAY, path_length=path_length)
        constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
        assert constraints.critical and constraints.value.ca
        assert constraints.value.path_length == path_length
        assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
        assert ca.issuer == ca.subject
        ca.verify_directly_issued_by(ca)
        assert ca.not_valid_before_utc <= dt.datetime.now(dt.UTC) - pki.CLOCK_SKEW + dt.timedelta(seconds=5)


def test_a_leaf_carries_its_names_usages_and_issuer() -> None:
    ca_key = pki.new_key()
    ca = pki.self_signed_ca(ca_key, "test-ca", DAY, path_length=0)
    key, leaf = pki.issue(
        ca_key, ca, "web", DAY, organizations=["ops"], hosts=["web.ns.svc", "10.0.0.1"], server=True
    )
    leaf.verify_directly_issued_by(ca)
    assert isinstance(key.curve, ec.SECP256R1)
    assert leaf.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "ops"
    assert list(leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH
    ]
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["web.ns.svc"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["10.0.0.1"]
    assert b"PRIVATE KEY" in pki.key_pem(key)


def test_a_leaf_without_usages_has_no_empty_extended_key_usage() -> None:
    ca_key = pki.new_key()
    ca = pki.self_signed_ca(ca_key, "test-ca", DAY, path_length=None)
    _, leaf = pki.issue(ca_key, ca, "anything", DAY)
    names = [ext.oid for ext in leaf.extensions]  # parses (an empty extendedKeyUsage does not)
    assert x509.ExtendedKeyUsage.oid not in names
