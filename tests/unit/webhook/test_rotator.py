"""CertSecret: what a self-managed webhook certificate is, checked before anything runs."""

from __future__ import annotations

import base64
import datetime as dt
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from kubeop.webhook import CertSecret
from kubeop.webhook.certs import KeyPair, make_ca, make_serving
from kubeop.webhook.rotator import (
    OWNER_ANNOTATION,
    CertificateRefused,
    _due,
    _examine,
    _Material,
    _renew,
    _write,
    service_hosts,
)


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


def _owned(data: Any) -> dict[str, Any]:
    return {"metadata": {"annotations": {OWNER_ANNOTATION: "true"}}, "data": data}


def _why(material: _Material, spec: CertSecret) -> str:
    """Why the rotator would renew what it made: a failed check, else nearing its end ("" neither)."""
    current, why = _examine(_owned(material.data()), spec, owned=True)
    return why or _due(current, spec) if current is not None else why


def test_what_makes_a_certificate_due() -> None:
    spec = CertSecret("c", ("svc.ns.svc",))
    assert _examine(None, spec, owned=True) == (None, "missing")
    assert _why(_material(spec, 3650, 365), spec) == ""
    assert "expires at" in _why(_material(spec, 3650, 100), spec)  # inside the last third
    other = CertSecret("c", ("other.ns.svc",))
    assert "not for other.ns.svc" in _why(_material(spec, 3650, 365), other)


def test_a_renewal_keeps_a_lasting_ca_and_replaces_one_about_to_expire() -> None:
    spec = CertSecret("c", ("svc.ns.svc",))
    lasting = _material(spec, 3650, 10)
    renewed = _renew(lasting, spec)
    assert renewed.ca == lasting.ca and renewed.bundle == lasting.bundle
    assert lasting.ca is not None and renewed.ca is not None
    renewed.serving.cert.verify_directly_issued_by(lasting.ca.cert)
    assert _why(renewed, spec) == ""
    ending = _material(spec, 400, 10)  # the CA would not outlive a new certificate
    replaced = _renew(ending, spec)
    assert replaced.ca is not None and ending.ca is not None and replaced.ca != ending.ca
    bundle = x509.load_pem_x509_certificates(replaced.bundle)
    assert [c.subject for c in bundle] == [replaced.ca.cert.subject, ending.ca.cert.subject]
    assert bundle[0].serial_number == replaced.ca.cert.serial_number
    assert bundle[1].serial_number == ending.ca.cert.serial_number  # still trusted until it expires


def test_a_secret_it_cannot_read_says_why_and_never_raises() -> None:
    spec = CertSecret("c", ("h",))
    assert _examine({"data": {"tls.crt": "bm90IGEgY2VydA=="}}, spec, owned=True) == (
        None,
        "it has no tls.key",
    )
    assert _examine({}, spec, owned=True) == (None, "it has no tls.crt")
    good = _material(spec, 3650, 365)
    assert _examine({"data": good.data()}, spec, owned=True) == (good, "")


def test_a_secret_whose_parts_do_not_belong_together_is_renewed_not_a_crash() -> None:
    spec = CertSecret("c", ("h",))
    good = _material(spec, 3650, 365)
    other = _material(spec, 3650, 365)

    def why(material: _Material) -> str:
        return _examine(_owned(material.data()), spec, owned=True)[1]

    # a serving certificate signed by another CA (same subject: only the signature differs)
    assert "tls.crt is not signed by the CA in ca.crt" in why(_Material(good.ca, other.serving, good.bundle))
    # a serving key that is not the certificate's, a CA key that is not the CA's
    swapped_key = KeyPair(other.serving.key_pem, good.serving.cert_pem)
    assert why(_Material(good.ca, swapped_key, good.bundle)) == "tls.key is not the key of tls.crt"
    assert other.ca is not None and good.ca is not None
    swapped_ca = KeyPair(other.ca.key_pem, good.ca.cert_pem)
    assert "ca.key is missing or not the key" in why(_Material(swapped_ca, good.serving, good.bundle))
    # wrong types and truncated PEM
    assert _examine({"data": ["tls.crt"]}, spec, owned=True)[0] is None
    assert _examine({"data": {**good.data(), "tls.key": 42}}, spec, owned=True) == (
        None,
        "its tls.key is not base64",
    )
    truncated = base64.b64encode(good.serving.cert_pem[:100]).decode()
    assert _examine({"data": {**good.data(), "tls.crt": truncated}}, spec, owned=True)[1] == (
        "its tls.crt is not a PEM certificate"
    )
    assert _examine({"data": "garbage"}, spec, owned=True)[0] is None


def test_a_key_pair_does_not_show_its_private_key() -> None:
    pair = make_ca()
    assert b"PRIVATE" in pair.key_pem
    assert "PRIVATE" not in repr(pair) and "PRIVATE" not in repr(_Material(pair, pair, pair.cert_pem))


def test_a_key_file_is_owner_only_even_over_a_leftover_temporary_file(tmp_path: Path) -> None:
    stale = tmp_path / ".tls.key.tmp"
    stale.write_bytes(b"left by a crash")
    stale.chmod(0o644)
    _write(tmp_path / "tls.key", b"key", 0o600)
    stale.unlink()
    assert (tmp_path / "tls.key").read_bytes() == b"key"
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600
    (tmp_path / "tls.key").chmod(0o644)  # same content, wrong mode: fixed too
    _write(tmp_path / "tls.key", b"key", 0o600)
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600


async def test_a_garbage_secret_of_its_own_is_renewed_keeping_its_type(tmp_path: Path) -> None:
    from kubeop.testing.fake import FakeCluster
    from kubeop.webhook.rotator import SECRETS, CertRotator

    spec = CertSecret("cert", ("svc.default.svc",), "default")
    async with FakeCluster().client() as api:
        await api.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": "cert",
                    "namespace": "default",
                    "annotations": {OWNER_ANNOTATION: "true", "other": "kept"},
                },
                "type": "Opaque",  # the type of a Secret is immutable: an update must keep it
                "data": {"tls.crt": base64.b64encode(b"-----BEGIN CERT").decode()},
            },
            resource=SECRETS,
        )
        rotator = CertRotator(api, spec, cert_dir=tmp_path)
        bundle = await rotator.ensure()
        secret = await api.get(SECRETS, "cert", namespace="default")
        assert secret["type"] == "Opaque"
        assert secret["metadata"]["annotations"] == {OWNER_ANNOTATION: "true", "other": "kept"}
        assert _examine(secret, spec, owned=True)[1] == "" and bundle and rotator.renewals == 1
        assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600


async def test_a_secret_the_rotator_creates_is_marked_as_its_own(tmp_path: Path) -> None:
    from kubeop.testing.fake import FakeCluster
    from kubeop.webhook.rotator import SECRETS, CertRotator

    async with FakeCluster().client() as api:
        await CertRotator(
            api, CertSecret("cert", ("svc.default.svc",), "default"), cert_dir=tmp_path
        ).ensure()
        secret = await api.get(SECRETS, "cert", namespace="default")
    assert secret["metadata"]["annotations"] == {OWNER_ANNOTATION: "true"}
    assert secret["type"] == "kubernetes.io/tls"


async def test_a_garbage_secret_it_did_not_make_is_refused_not_overwritten(tmp_path: Path) -> None:
    from kubeop.testing.fake import FakeCluster
    from kubeop.webhook.rotator import SECRETS, CertRotator

    async with FakeCluster().client() as api:
        data = {"tls.crt": base64.b64encode(b"-----BEGIN CERT").decode(), "tls.key": "", "ca.crt": ""}
        await api.create(
            {"metadata": {"name": "cert", "namespace": "default"}, "type": "Opaque", "data": data},
            resource=SECRETS,
        )
        rotator = CertRotator(api, CertSecret("cert", ("svc.default.svc",), "default"), cert_dir=tmp_path)
        with pytest.raises(CertificateRefused, match=r"default/cert .* did not make .*tls.crt is not a PEM"):
            await rotator.ensure()
        assert (await api.get(SECRETS, "cert", namespace="default"))["data"] == data
        assert rotator.renewals == 0 and not (tmp_path / "tls.crt").exists()


def test_a_ca_that_expires_before_its_serving_certificate_is_due() -> None:
    spec = CertSecret("c", ("h",))
    assert "the CA expires at" in _why(_material(spec, 300, 365), spec)  # made elsewhere
    assert _why(_material(spec, 3650, 365), spec) == ""


async def test_the_ca_bundle_is_injected_before_a_new_serving_certificate_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubeop.testing.fake import FakeCluster
    from kubeop.webhook import rotator as module

    order: list[str] = []
    write, inject = module._write, module.CertRotator._inject

    def recording_write(path: Path, data: bytes, mode: int) -> None:
        order.append(f"write {path.name}")
        write(path, data, mode)

    async def recording_inject(self: Any, entry: str, bundle: bytes) -> bool:
        order.append("inject")
        return await inject(self, entry, bundle)

    monkeypatch.setattr(module, "_write", recording_write)
    monkeypatch.setattr(module.CertRotator, "_inject", recording_inject)
    async with FakeCluster().client() as api:
        target = ("validatingwebhookconfigurations/v",)
        spec = CertSecret("cert", ("svc.default.svc",), "default", inject=target)
        await module.CertRotator(api, spec, cert_dir=tmp_path).ensure()
    # the API server trusts the new CA before any server presents a certificate from it
    assert order.index("inject") < order.index("write tls.crt")


def test_writers_of_one_cert_dir_at_once_never_fail_or_leave_half_files(tmp_path: Path) -> None:
    import threading

    from kubeop.webhook import certs

    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(200):
                data = f"{n}-{i}".encode() * 100
                (_write if n % 2 else certs._write)(tmp_path / "tls.key", data, 0o600)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    text = (tmp_path / "tls.key").read_bytes()
    assert text == text[: len(text) // 100] * 100  # one writer's whole content
    assert [p.name for p in tmp_path.iterdir()] == ["tls.key"]


async def test_the_ca_bundle_goes_into_an_apiservice(tmp_path: Path) -> None:
    """An aggregated API server's certificate: kube-apiserver checks it against the APIService's
    spec.caBundle, which the rotator sets, and sets again when the CA changes."""
    from kubeop.testing.fake import FakeCluster
    from kubeop.webhook.rotator import INJECTABLE, CertRotator

    apiservices = INJECTABLE["apiservices"]
    cluster = FakeCluster()
    cluster.add_crd(  # the fake serves no APIService: one as a CRD of the same name
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "apiservices.apiregistration.k8s.io"},
            "spec": {
                "group": "apiregistration.k8s.io",
                "scope": "Cluster",
                "names": {"plural": "apiservices", "singular": "apiservice", "kind": "APIService"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            }
                        },
                    }
                ],
            },
        }
    )
    async with cluster.client() as api:
        await api.create(
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": "v1alpha1.example.com"},
                "spec": {"group": "example.com", "version": "v1alpha1", "service": {"name": "s"}},
            },
            resource=apiservices,
        )
        spec = CertSecret.for_service(
            "cert",
            "s",
            "default",
            inject=("apiservices/v1alpha1.example.com",),
            ca_validity=dt.timedelta(days=400),
        )
        rotator = CertRotator(api, spec, cert_dir=tmp_path)
        bundle = await rotator.ensure()
        got = await api.get(apiservices, "v1alpha1.example.com")
        assert base64.b64decode(got["spec"]["caBundle"]) == bundle
        renewed = CertSecret.for_service(  # the CA outlives no new certificate: a new CA next to the old
            "cert",
            "s",
            "default",
            inject=spec.inject,
            ca_validity=dt.timedelta(days=400),
            renew_before=dt.timedelta(days=366),
        )
        second = await CertRotator(api, renewed, cert_dir=tmp_path).ensure()
        assert second != bundle and second.endswith(bundle)
        got = await api.get(apiservices, "v1alpha1.example.com")
        assert base64.b64decode(got["spec"]["caBundle"]) == second and got["spec"]["group"] == "example.com"
