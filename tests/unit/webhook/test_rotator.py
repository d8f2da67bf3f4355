"""CertSecret: what a self-managed webhook certificate is, checked before anything runs."""

from __future__ import annotations

import datetime as dt

import pytest

from kubeop.webhook import CertSecret
from kubeop.webhook.rotator import service_hosts


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
