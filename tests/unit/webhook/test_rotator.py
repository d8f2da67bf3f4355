"""CertSecret: what a self-managed webhook certificate is, checked before anything runs."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from cryptography import x509

from kubeop.webhook import CertSecret
from kubeop.webhook.certs import make_ca, make_serving
from kubeop.webhook.rotator import _decode, _Material, _problem, _renew, service_hosts


def test_for_service_names_what_the_api_server_dials() -> None:
    spec = CertSecret.for_service("op-cert", "op-webhook-service", "op-system")
    assert spec.hosts == service_hosts("op-webhook-service", "op-system")
    assert "op-webhook-service.op-system.svc" in spec.hosts and spec.namespace == "op-system"
    assert spec.renew_window == dt.timedelta(days=365) / 3


@pytest.mark.parametrize(
    "entry", ["secrets/x", "validatingwebhookconfigurations/", "validatingwebhookconfigurations", "crds/x"]
)
def test_an_inject_target_it_cannot_patch_is_refused_naming_it(entry: str) -> None:
    with pytest.raises(ValueError, match=f"cannot inject the CA into '{entry}'"):
        CertSecret("c", ("h",), inject=(entry,))


def test_the_certificate_must_expire_before_its_ca() -> None:
    with pytest.raises(ValueError, match="before its CA"):
        CertSecret("c", ("h",), validity=dt.timedelta(days=4000))
    with pytest.raises(ValueError, match="at least one host"):
        CertSecret("c", ())


def _material(spec: CertSecret, ca_days: float, cert_days: float) -> Any:
    ca = make_ca(dt.timedelta(days=ca_days))
    return _Material(ca, make_serving(ca, spec.hosts, dt.timedelta(days=cert_days)), ca.cert_pem)


def test_what_makes_a_certificate_due() -> None:
    spec = CertSecret("c", ("svc.ns.svc",))
    assert _problem(None, spec) == "missing or unreadable"
    assert _problem(_material(spec, 3650, 365), spec) is None
    assert "expires at" in str(_problem(_material(spec, 3650, 100), spec))  # inside the last third
    other = CertSecret("c", ("other.ns.svc",))
    assert "not for other.ns.svc" in str(_problem(_material(spec, 3650, 365), other))


def test_a_renewal_keeps_a_lasting_ca_and_replaces_one_about_to_expire() -> None:
    spec = CertSecret("c", ("svc.ns.svc",))
    lasting = _material(spec, 3650, 10)
    renewed = _renew(lasting, spec)
    assert renewed.ca == lasting.ca and renewed.bundle == lasting.bundle
    renewed.serving.cert.verify_directly_issued_by(lasting.ca.cert)
    assert _problem(renewed, spec) is None
    ending = _material(spec, 400, 10)  # the CA would not outlive a new certificate
    replaced = _renew(ending, spec)
    assert replaced.ca != ending.ca
    bundle = x509.load_pem_x509_certificates(replaced.bundle)
    assert [c.subject for c in bundle] == [replaced.ca.cert.subject, ending.ca.cert.subject]
    assert bundle[0].serial_number == replaced.ca.cert.serial_number
    assert bundle[1].serial_number == ending.ca.cert.serial_number  # still trusted until it expires


def test_a_secret_it_cannot_read_is_missing_not_an_error() -> None:
    assert _decode({"data": {"tls.crt": "bm90IGEgY2VydA=="}}) is None
    assert _decode({}) is None
    spec = CertSecret("c", ("h",))
    good = _material(spec, 3650, 365)
    assert _decode({"data": good.data()}) == good
