"""Self-managed webhook certificates: a CA and a serving certificate kept in a Secret by the operator.

::

    spec = CertSecret.for_service("my-operator-webhook-server-cert", "my-operator-webhook-service",
                                  "my-operator-system",
                                  inject=("validatingwebhookconfigurations/my-operator-webhook-validating",))
    rotator = CertRotator(client, spec, cert_dir="/tmp/k8s-webhook-server/serving-certs")
    await rotator.ensure()          # before the webhook server starts
    await rotator.run(stop_event)   # keeps it valid: renews and re-injects, every check_interval

What cert-manager does for a cluster, without cert-manager (the job of controller-runtime's
cert-controller "rotator" in many operators). At start every replica:

1. reads the Secret (``tls.crt``, ``tls.key``, ``ca.crt``, ``ca.key``); when it is missing the
   replica makes a CA and a serving certificate for the webhook Service's DNS names and *creates*
   it. Only one create wins (AlreadyExists for the others, which read the winner's);
2. when the serving certificate expires within ``renew_before`` (default: the last third of its
   life), is for other hosts or not from the CA, it makes a new one and *updates* the Secret with
   the resourceVersion it read: a concurrent renewal makes the update fail with Conflict, and the
   loser reads the winner's. The CA is kept while it outlives the new certificate; a new CA is
   published next to the old one in ``ca.crt`` (until the old one expires), so servers still on
   the old certificate stay trusted;
3. writes ``tls.crt`` / ``tls.key`` / ``ca.crt`` into the cert dir (the webhook server reloads
   them on change) and patches ``caBundle`` into the webhook configurations and the conversion
   stanza of the CRDs named in ``inject``, when it differs.

RBAC: get/create/update on the Secret in the operator's namespace, get/patch on each named
configuration and CRD (``kubeop manifests`` generates exactly that).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from kubeop.client import Client
from kubeop.core.errors import AlreadyExists, Conflict, NotFound
from kubeop.core.patch import PatchType
from kubeop.core.resource import ApiResource
from kubeop.webhook.certs import CA_KEY_NAME, CA_NAME, CERT_NAME, KEY_NAME, KeyPair, make_ca, make_serving
from kubeop.webhook.certs import _write as write_file

__all__ = ["INJECTABLE", "CertRotator", "CertSecret"]

log = logging.getLogger("kubeop.webhook")

SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
INJECTABLE = {
    "validatingwebhookconfigurations": ApiResource(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        kind="ValidatingWebhookConfiguration",
        namespaced=False,
    ),
    "mutatingwebhookconfigurations": ApiResource(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        kind="MutatingWebhookConfiguration",
        namespaced=False,
    ),
    "customresourcedefinitions": ApiResource(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        kind="CustomResourceDefinition",
        namespaced=False,
    ),
}
_ATTEMPTS = 5


def service_hosts(service: str, namespace: str) -> tuple[str, ...]:
    """The DNS names the API server uses for a Service: ``svc.ns.svc`` and the longer and shorter forms."""
    return (
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
    )


@dataclass(frozen=True)
class CertSecret:
    """What :class:`CertRotator` keeps: the Secret, the hosts, and where to inject the CA.

    ``inject`` lists ``<resource>/<name>`` of validatingwebhookconfigurations,
    mutatingwebhookconfigurations and customresourcedefinitions; ``namespace`` None means the
    client's (the pod's) namespace.
    """

    name: str
    hosts: tuple[str, ...]
    namespace: str | None = None
    inject: tuple[str, ...] = ()
    validity: dt.timedelta = dt.timedelta(days=365)
    ca_validity: dt.timedelta = dt.timedelta(days=3650)
    renew_before: dt.timedelta | None = None
    check_interval: float = 3600.0

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("the webhook certificate Secret needs a name")
        if not self.hosts:
            raise ValueError(f"Secret {self.name}: the serving certificate needs at least one host")
        for entry in self.inject:
            resource, _, name = entry.partition("/")
            if resource not in INJECTABLE or not name:
                raise ValueError(
                    f"cannot inject the CA into {entry!r}: use <resource>/<name> with resource one of "
                    f"{', '.join(INJECTABLE)} (e.g. validatingwebhookconfigurations/my-webhook)"
                )
        if self.validity >= self.ca_validity:
            raise ValueError("the serving certificate must expire before its CA (validity < ca_validity)")

    @classmethod
    def for_service(
        cls, name: str, service: str, namespace: str, *, inject: Sequence[str] = (), **options: Any
    ) -> CertSecret:
        """For a webhook reached through ``service`` in ``namespace`` (what the API server dials)."""
        return cls(name, service_hosts(service, namespace), namespace, tuple(inject), **options)

    @property
    def renew_window(self) -> dt.timedelta:
        return self.renew_before if self.renew_before is not None else self.validity / 3


@dataclass(frozen=True)
class _Material:
    ca: KeyPair
    serving: KeyPair
    bundle: bytes  # ca.crt: the current CA, then a previous one still trusted

    def data(self) -> dict[str, str]:
        raw = {
            CERT_NAME: self.serving.cert_pem,
            KEY_NAME: self.serving.key_pem,
            CA_NAME: self.bundle,
            CA_KEY_NAME: self.ca.key_pem,
        }
        return {k: base64.b64encode(v).decode() for k, v in raw.items()}


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _decode(secret: dict[str, Any]) -> _Material | None:
    """The material in a Secret, or None when something is missing, does not parse or does not
    belong together (a key that is not its certificate's, a certificate the CA did not sign)."""
    data = secret.get("data") or {}
    try:
        raw = {k: base64.b64decode(data[k]) for k in (CERT_NAME, KEY_NAME, CA_NAME, CA_KEY_NAME)}
        bundle = raw[CA_NAME]
        ca_cert = x509.load_pem_x509_certificates(bundle)[0].public_bytes(Encoding.PEM)
        material = _Material(
            KeyPair(raw[CA_KEY_NAME], ca_cert), KeyPair(raw[KEY_NAME], raw[CERT_NAME]), bundle
        )
        for pair in (material.ca, material.serving):
            if _public(pair.key().public_key()) != _public(pair.cert.public_key()):
                return None
        material.serving.cert.verify_directly_issued_by(material.ca.cert)
        return material
    except (KeyError, ValueError, TypeError, IndexError, InvalidSignature, UnsupportedAlgorithm):
        return None


def _public(key: Any) -> bytes:
    return bytes(key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo))


def _hosts(cert: x509.Certificate) -> set[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} | set(
        san.get_values_for_type(x509.DNSName)
    )


def _problem(material: _Material | None, spec: CertSecret) -> str | None:
    """Why the material must be renewed (None: it is good)."""
    if material is None:
        return "missing or unreadable"
    cert = material.serving.cert
    if cert.not_valid_after_utc - _now() < spec.renew_window:
        return f"the serving certificate expires at {cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC"
    ca_end = material.ca.cert.not_valid_after_utc
    if ca_end < cert.not_valid_after_utc:  # not one the rotator made: the chain breaks at ca_end
        return f"the CA expires at {ca_end:%Y-%m-%d %H:%M:%S} UTC, before its serving certificate"
    if not set(spec.hosts) <= _hosts(cert):
        return f"the serving certificate is not for {', '.join(sorted(set(spec.hosts) - _hosts(cert)))}"
    return None


def _unexpired(bundle: bytes) -> bytes:
    now = _now()
    certs = x509.load_pem_x509_certificates(bundle)
    return b"".join(c.public_bytes(Encoding.PEM) for c in certs if c.not_valid_after_utc > now)


def _renew(old: _Material | None, spec: CertSecret) -> _Material:
    """A new serving certificate, from the old CA while it outlives it by the renew window; a new
    CA is published next to the old ones that have not expired (servers still on a certificate
    from them stay trusted), expired ones leave the bundle."""
    if old is not None and old.ca.cert.not_valid_after_utc - _now() > spec.validity + spec.renew_window:
        ca, bundle = old.ca, _unexpired(old.bundle)
    else:
        ca = make_ca(spec.ca_validity)
        bundle = ca.cert_pem + (_unexpired(old.bundle) if old is not None else b"")
    return _Material(ca, make_serving(ca, spec.hosts, spec.validity), bundle)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write by a rename (a server reloading never reads half a file), with ``mode`` whatever a
    file left there had (os.open's mode applies only to a file it creates)."""
    if path.exists() and path.read_bytes() == data:
        if os.stat(path).st_mode & 0o777 != mode:
            os.chmod(path, mode)
        return
    write_file(path, data, mode)


class CertRotator:
    """Keeps ``spec``'s Secret, the cert dir and the injected caBundles valid; see the module docstring."""

    def __init__(
        self,
        client: Client,
        spec: CertSecret,
        *,
        cert_dir: str | os.PathLike[str],
        namespace: str | None = None,
    ) -> None:
        self.client = client
        self.spec = spec
        self.namespace = spec.namespace or namespace or client.namespace or "default"
        self.cert_dir = Path(cert_dir)
        self.ca_bundle = b""
        self.renewals = 0  # how many times this process wrote a new certificate
        self.pending: list[str] = []  # what could not be injected yet (not there)

    @property
    def secret(self) -> str:
        return f"{self.namespace}/{self.spec.name}"

    async def ensure(self) -> bytes:
        """Make the Secret valid (create or renew it), write the files, inject the CA; the CA bundle."""
        material = await self._settle()
        # The API server trusts the bundle (a new CA next to the old) before this server presents
        # a certificate from the new CA: inject first, then write the files.
        self.pending = [entry for entry in self.spec.inject if not await self._inject(entry, material.bundle)]
        self.cert_dir.mkdir(parents=True, exist_ok=True)
        # The key first: a server reloading between the two keeps the old pair until both match.
        _write(self.cert_dir / KEY_NAME, material.serving.key_pem, 0o600)
        _write(self.cert_dir / CERT_NAME, material.serving.cert_pem, 0o644)
        _write(self.cert_dir / CA_NAME, material.bundle, 0o644)
        self.ca_bundle = material.bundle
        return material.bundle

    async def run(self, stop: asyncio.Event) -> None:
        """:meth:`ensure` every ``check_interval`` seconds (every few seconds while an object to
        inject is missing or a call failed) until ``stop`` is set."""
        interval = self.spec.check_interval
        while not stop.is_set():
            delay = min(interval, 5.0) if self.pending else interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                return
            try:
                await self.ensure()
            except Exception as exc:  # the next round retries; the server keeps its current pair
                log.warning("webhook certificate Secret %s not checked: %s", self.secret, exc)
                self.pending = ["retry"]

    async def _settle(self) -> _Material:
        for _ in range(_ATTEMPTS):
            secret = await self.client.get_or_none(SECRETS, self.spec.name, namespace=self.namespace)
            current = _decode(secret) if secret is not None else None
            why = _problem(current, self.spec)
            if why is None and current is not None:
                return current
            fresh = _renew(current, self.spec)
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": self.spec.name, "namespace": self.namespace},
                "type": "kubernetes.io/tls",
                "data": fresh.data(),
            }
            try:
                if secret is None:
                    await self.client.create(body, resource=SECRETS)
                else:
                    md = secret["metadata"]
                    body["metadata"] = {**md, "resourceVersion": md["resourceVersion"]}
                    body["type"] = secret.get("type") or body["type"]  # immutable: the API refuses a change
                    await self.client.update(body, resource=SECRETS)
            except (AlreadyExists, Conflict):
                continue  # another replica wrote it first: read theirs
            self.renewals += 1
            log.info(
                "webhook certificate Secret %s %s (%s): serving certificate valid until %s UTC",
                self.secret,
                "created" if secret is None else "renewed",
                why,
                f"{fresh.serving.cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S}",
            )
            return fresh
        raise RuntimeError(f"Secret {self.secret} kept changing under {_ATTEMPTS} attempts to read it")

    async def _inject(self, entry: str, bundle: bytes) -> bool:
        """Patch ``caBundle`` into one configuration or CRD; False when it is not there (yet)."""
        kind, _, name = entry.partition("/")
        resource = INJECTABLE[kind]
        try:
            obj = await self.client.get(resource, name)
        except NotFound:
            log.info("%s %s not found yet: its caBundle is set when it appears", resource.kind, name)
            return False
        value = base64.b64encode(bundle).decode()
        ops: list[dict[str, Any]] = []
        if kind == "customresourcedefinitions":
            conversion = (obj.get("spec") or {}).get("conversion") or {}
            config = (conversion.get("webhook") or {}).get("clientConfig")
            if conversion.get("strategy") != "Webhook" or config is None:
                return True  # nothing to trust: the CRD converts nothing by webhook
            if config.get("caBundle") != value:
                ops.append(
                    {"op": "add", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": value}
                )
        else:
            for i, webhook in enumerate(obj.get("webhooks") or ()):
                if (webhook.get("clientConfig") or {}).get("caBundle") != value:
                    # the test keeps the index honest if the list changed since the read
                    ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": webhook["name"]})
                    ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": value})
        if ops:
            await self.client.patch(
                resource, name, ops, type=PatchType.JSON, field_manager="kubeop-cert-rotator"
            )
            log.info("caBundle of %s %s set from Secret %s", resource.kind, name, self.secret)
        return True
