"""What a webhook serving pair must be, and what the rotator does with one that is not.

Fixtures are made here with ``cryptography`` as other tools make them (RSA, no CA flag, a wrong
extendedKeyUsage...). A pair the rotator made and that fails a check is renewed; a pair made
elsewhere is kept while it passes and refused (never overwritten) when it fails.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubeop.testing.fake import FakeCluster
from kubeop.webhook import CertSecret
from kubeop.webhook.certs import ca_problem, load_key, make_ca, serving_problem
from kubeop.webhook.rotator import OWNER_ANNOTATION, SECRETS, CertificateRefused, CertRotator

HOSTS = ("svc.default.svc", "svc.default.svc.cluster.local", "svc.default")
NOW = dt.datetime.now(dt.UTC)
Key = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


@functools.cache
def _rsa(bits: int = 2048, n: int = 0) -> Key:
    """RSA keys, made once each (a 2048-bit one takes a while): ``n`` tells distinct ones apart."""
    return rsa.generate_private_key(65537, bits)


def _ec() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: Any) -> bytes:
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class Pair:
    """A CA and a serving certificate as another tool may make them; each field one way to differ."""

    ca_key: Any = field(default_factory=_rsa)
    key: Any = field(default_factory=lambda: _rsa(n=1))
    ca_is_ca: bool | None = True  # None: no basicConstraints at all
    ca_key_usage: x509.KeyUsage | None = field(
        default_factory=lambda: x509.KeyUsage(True, False, False, False, False, True, True, False, False)
    )
    not_before: dt.datetime = NOW - dt.timedelta(hours=1)
    not_after: dt.datetime = NOW + dt.timedelta(days=365)
    usages: list[x509.ObjectIdentifier] | None = field(
        default_factory=lambda: [ExtendedKeyUsageOID.SERVER_AUTH]
    )
    names: tuple[str, ...] = HOSTS
    cert_key: Any = None  # the key in the certificate when it is not ``key`` (a mismatched pair)

    def ca(self) -> x509.Certificate:
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "someone-elses-ca")])
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(NOW - dt.timedelta(days=1))
            .not_valid_after(NOW + dt.timedelta(days=3650))
        )
        if self.ca_is_ca is not None:
            builder = builder.add_extension(x509.BasicConstraints(self.ca_is_ca, None), critical=True)
        if self.ca_key_usage is not None:
            builder = builder.add_extension(self.ca_key_usage, critical=True)
        return builder.sign(self.ca_key, hashes.SHA256())

    def cert(self, ca: x509.Certificate) -> x509.Certificate:
        public = (self.cert_key or self.key).public_key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, self.names[0])]))
            .issuer_name(ca.subject)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(self.not_before)
            .not_valid_after(self.not_after)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in self.names]), critical=False)
        )
        if self.usages is not None:
            builder = builder.add_extension(x509.ExtendedKeyUsage(self.usages), critical=False)
        return builder.sign(self.ca_key, hashes.SHA256())

    def data(self, ca_key: bool = True) -> dict[str, str]:
        ca = self.ca()
        raw = {"tls.crt": _pem(self.cert(ca)), "tls.key": _pem_key(self.key), "ca.crt": _pem(ca)}
        if ca_key:
            raw["ca.key"] = _pem_key(self.ca_key)
        return {k: base64.b64encode(v).decode() for k, v in raw.items()}

    def problem(self, hosts: tuple[str, ...] = HOSTS) -> str | None:
        ca = self.ca()
        return ca_problem(ca) or serving_problem(self.cert(ca), _pem_key(self.key), ca, hosts)


def _ecdsa(**differences: Any) -> Pair:
    return Pair(ca_key=_ec(), key=_ec(), **differences)


# -- the checks ---------------------------------------------------------------------------------


def test_rsa_and_ecdsa_pairs_pass() -> None:
    assert Pair().problem() is None
    assert Pair(ca_key=_ec(), key=_ec()).problem() is None
    assert Pair(ca_key=_rsa(3072), key=_ec()).problem() is None


def test_a_certificate_not_yet_valid_fails_beyond_the_clock_skew() -> None:
    assert "tls.crt is not valid before" in str(Pair(not_before=NOW + dt.timedelta(days=1)).problem())
    assert Pair(not_before=NOW + dt.timedelta(minutes=2)).problem() is None  # a replica's clock ahead
    assert "tls.crt expired at" in str(Pair(not_after=NOW - dt.timedelta(minutes=1)).problem())


def test_a_ca_without_ca_true_or_key_cert_sign_fails() -> None:
    assert "is not a CA: it has no basicConstraints CA:TRUE" in str(Pair(ca_is_ca=False).problem())
    assert "is not a CA" in str(Pair(ca_is_ca=None).problem())
    signs_only_data = x509.KeyUsage(True, False, False, False, False, False, False, False, False)
    assert "keyUsage lacks keyCertSign" in str(Pair(ca_key_usage=signs_only_data).problem())
    assert Pair(ca_key_usage=None).problem() is None  # no keyUsage: unrestricted (RFC 5280, Go)


def test_a_certificate_for_clients_only_fails() -> None:
    client_only = Pair(usages=[ExtendedKeyUsageOID.CLIENT_AUTH])
    assert client_only.problem() == "tls.crt may not serve TLS: its extendedKeyUsage lacks serverAuth"
    assert Pair(usages=[ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH]).problem() is None
    assert Pair(usages=None).problem() is None  # no extendedKeyUsage: unrestricted


def test_a_key_that_is_not_the_certificates_fails() -> None:
    assert Pair(cert_key=_rsa(n=2)).problem() == "tls.key is not the key of tls.crt"


def test_the_names_must_cover_every_host_the_api_server_may_dial() -> None:
    short = Pair(names=("svc.default.svc",))
    assert str(short.problem()).startswith(
        "tls.crt is not for svc.default.svc.cluster.local, svc.default (its subjectAltNames: svc.default.svc)"
    )
    assert Pair(names=("SVC.default.svc", "*.default.svc.cluster.local", "svc.default")).problem() is None
    assert Pair(names=("*.svc", "x")).problem(("a.b.svc",)) is not None  # a wildcard is one label


def test_weak_or_unusable_keys_fail_naming_what_to_use() -> None:
    with pytest.raises(ValueError, match=r"1024-bit RSA key: use RSA \(2048 bits or more\) or ECDSA"):
        load_key(_pem_key(_rsa(1024)))
    with pytest.raises(ValueError, match="ECDSA key on secp256k1"):
        load_key(_pem_key(ec.generate_private_key(ec.SECP256K1())))
    ed = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with pytest.raises(ValueError, match="Ed25519PrivateKey: use RSA"):
        load_key(ed)
    with pytest.raises(ValueError, match="is not a PEM private key"):
        load_key(b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")


def test_make_serving_signs_with_an_rsa_ca() -> None:
    from kubeop.webhook.certs import KeyPair, make_serving

    pair = Pair()
    ca = KeyPair(_pem_key(pair.ca_key), _pem(pair.ca()))
    serving = make_serving(ca, HOSTS)
    assert serving_problem(serving.cert, serving.key_pem, ca.cert, HOSTS) is None
    assert ca_problem(make_ca().cert) is None


# -- the rotator ----------------------------------------------------------------------------------


async def _ensure(tmp_path: Path, data: dict[str, str], *, owned: bool) -> tuple[CertRotator, dict[str, Any]]:
    """A rotator's ensure() on a Secret holding ``data``; the rotator and the Secret after it."""
    metadata: dict[str, Any] = {"name": "cert", "namespace": "default"}
    if owned:
        metadata["annotations"] = {OWNER_ANNOTATION: "true"}
    async with FakeCluster().client() as api:
        secret = {"metadata": metadata, "type": "kubernetes.io/tls", "data": data}
        await api.create(secret, resource=SECRETS)
        rotator = CertRotator(api, CertSecret("cert", HOSTS, "default"), cert_dir=tmp_path)
        try:
            await rotator.ensure()
        finally:
            after = await api.get(SECRETS, "cert", namespace="default")
    return rotator, after


async def test_an_rsa_pair_is_kept_not_called_unreadable(tmp_path: Path) -> None:
    for owned in (True, False):
        data = Pair().data()
        rotator, after = await _ensure(tmp_path / str(owned), data, owned=owned)
        assert rotator.renewals == 0 and after["data"] == data
        assert (tmp_path / str(owned) / "tls.crt").read_bytes() == base64.b64decode(data["tls.crt"])
        assert rotator.ca_bundle == base64.b64decode(data["ca.crt"])


async def test_a_pair_from_cert_manager_without_ca_key_is_used(tmp_path: Path) -> None:
    data = Pair(ca_key=_ec(), key=_ec()).data(ca_key=False)
    rotator, after = await _ensure(tmp_path, data, owned=False)
    assert rotator.renewals == 0 and after["data"] == data


@pytest.mark.parametrize(
    ("pair", "why"),
    [
        (lambda: _ecdsa(not_before=NOW + dt.timedelta(days=2)), "tls.crt is not valid before"),
        (lambda: _ecdsa(ca_is_ca=False), "is not a CA: it has no basicConstraints CA:TRUE"),
        (lambda: _ecdsa(usages=[ExtendedKeyUsageOID.CLIENT_AUTH]), "extendedKeyUsage lacks serverAuth"),
        (lambda: _ecdsa(cert_key=_ec()), "tls.key is not the key of tls.crt"),
        (lambda: _ecdsa(names=("other.default.svc",)), "tls.crt is not for svc.default.svc"),
    ],
    ids=["not-yet-valid", "non-ca", "client-eku", "mismatched-key", "other-names"],
)
async def test_a_pair_failing_a_check_is_renewed_when_the_rotators_and_refused_otherwise(
    tmp_path: Path, pair: Any, why: str
) -> None:
    data = pair().data()
    rotator, after = await _ensure(tmp_path / "owned", data, owned=True)
    assert rotator.renewals == 1 and after["data"] != data
    assert (tmp_path / "owned" / "tls.crt").read_bytes() == base64.b64decode(after["data"]["tls.crt"])

    with pytest.raises(
        CertificateRefused, match=f"Secret default/cert holds a certificate .* {why}"
    ) as caught:
        await _ensure(tmp_path / "theirs", data, owned=False)
    assert "delete the Secret to let the rotator make its own" in str(caught.value)
    assert not (tmp_path / "theirs" / "tls.crt").exists()  # the server keeps what it had


async def test_a_pair_made_elsewhere_is_never_overwritten(tmp_path: Path) -> None:
    data = Pair(ca_is_ca=False).data()
    metadata = {"name": "cert", "namespace": "default"}
    async with FakeCluster().client() as api:
        await api.create({"metadata": metadata, "type": "kubernetes.io/tls", "data": data}, resource=SECRETS)
        rotator = CertRotator(
            api, CertSecret("cert", HOSTS, "default", check_interval=0.01), cert_dir=tmp_path
        )
        import asyncio

        stop = asyncio.Event()
        task = asyncio.ensure_future(rotator.run(stop))
        await asyncio.sleep(0.1)  # a few rounds
        stop.set()
        await asyncio.wait_for(task, 5)
        assert (await api.get(SECRETS, "cert", namespace="default"))["data"] == data
    assert rotator.renewals == 0


async def test_a_secret_written_before_the_annotation_is_still_the_rotators(tmp_path: Path) -> None:
    from kubeop.webhook.certs import make_serving

    ca = make_ca()
    expired = make_serving(ca, HOSTS, dt.timedelta(seconds=1))
    raw = {
        "tls.crt": expired.cert_pem,
        "tls.key": expired.key_pem,
        "ca.crt": ca.cert_pem,
        "ca.key": ca.key_pem,
    }
    data = {k: base64.b64encode(v).decode() for k, v in raw.items()}
    rotator, after = await _ensure(tmp_path, data, owned=False)
    assert rotator.renewals == 1 and after["data"]["ca.crt"] == data["ca.crt"]  # the same CA
    assert after["metadata"]["annotations"] == {OWNER_ANNOTATION: "true"}
