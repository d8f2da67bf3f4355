"""Manifests that make the API server call the webhooks: webhook configurations and the CRD's
``conversion: Webhook`` stanza.

::

    local = Endpoint.url("https://127.0.0.1:9443", ca_bundle=certs.ca_pem)        # local runs, tests
    cluster = Endpoint.service("my-operator-webhook", "my-operator-system",        # kubeop deploy
                               cert_manager="my-operator-system/serving-cert")
    manifests = webhook_configurations(webhooks, "my-operator", local)
    crd = with_conversion(crd_manifest([CronTabV1Beta1, CronTab]), conversion, local)

On the local control plane the URL form is the one that works (the API server cannot reach a
Service backed by fake pods); the Service form is for real clusters. With ``cert_manager`` the
configurations and the CRD carry ``cert-manager.io/inject-ca-from`` and cert-manager's CA
injector fills in ``caBundle``; otherwise give the CA.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubeop.webhook.admission import AdmissionWebhook
from kubeop.webhook.conversion import Conversion
from kubeop.webhook.registry import Webhooks

__all__ = ["Endpoint", "webhook_configurations", "with_conversion"]

Obj = dict[str, Any]
INJECT_CA = "cert-manager.io/inject-ca-from"


@dataclass(frozen=True)
class Endpoint:
    """Where the API server reaches the webhook server, and how it trusts it."""

    base_url: str | None = None
    service_name: str | None = None
    service_namespace: str | None = None
    service_port: int = 443
    ca_bundle: bytes | None = None
    cert_manager: str | None = None

    @classmethod
    def url(
        cls, base_url: str, *, ca_bundle: bytes | None = None, cert_manager: str | None = None
    ) -> Endpoint:
        """The API server calls the webhooks at ``base_url`` (https only; raises ValueError otherwise),
        trusting ``ca_bundle`` or the CA cert-manager injects from the Certificate ``cert_manager`` names.
        """
        if not base_url.startswith("https://"):
            raise ValueError(f"a webhook URL must be https://, not {base_url!r}")
        return cls(base_url=base_url.rstrip("/"), ca_bundle=ca_bundle, cert_manager=cert_manager)

    @classmethod
    def service(
        cls,
        name: str,
        namespace: str,
        *,
        port: int = 443,
        ca_bundle: bytes | None = None,
        cert_manager: str | None = None,
    ) -> Endpoint:
        """The API server calls the webhooks through the Service ``namespace/name`` on ``port``, trusting
        ``ca_bundle`` or the CA cert-manager injects from the Certificate ``cert_manager`` names.
        """
        return cls(
            service_name=name,
            service_namespace=namespace,
            service_port=port,
            ca_bundle=ca_bundle,
            cert_manager=cert_manager,
        )

    def client_config(self, path: str) -> Obj:
        """The ``clientConfig`` of a webhook served at ``path`` on this endpoint."""
        config: Obj
        if self.base_url is not None:
            config = {"url": f"{self.base_url}{path}"}
        else:
            config = {
                "service": {
                    "name": self.service_name,
                    "namespace": self.service_namespace,
                    "path": path,
                    "port": self.service_port,
                }
            }
        if self.ca_bundle is not None:
            config["caBundle"] = base64.b64encode(self.ca_bundle).decode()
        return config

    def annotations(self) -> Obj:
        """The annotations a configuration needs for cert-manager to inject its CA (none without
        cert-manager).
        """
        return {INJECT_CA: self.cert_manager} if self.cert_manager else {}


def webhook_configurations(
    webhooks: Webhooks | Iterable[AdmissionWebhook | Conversion], name: str, endpoint: Endpoint
) -> list[Obj]:
    """A ValidatingWebhookConfiguration ``<name>-validating`` and a MutatingWebhookConfiguration
    ``<name>-mutating`` for the admission webhooks (each only when it has webhooks)."""
    admission = [w for w in webhooks if isinstance(w, AdmissionWebhook)]
    out = []
    for mutating, kind, suffix in (
        (False, "ValidatingWebhookConfiguration", "validating"),
        (True, "MutatingWebhookConfiguration", "mutating"),
    ):
        chosen = [w for w in admission if w.mutating == mutating]
        if not chosen:
            continue
        metadata: Obj = {"name": f"{name}-{suffix}"}
        if endpoint.annotations():
            metadata["annotations"] = endpoint.annotations()
        out.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": metadata,
                "webhooks": [w.configuration(endpoint.client_config(w.path)) for w in chosen],
            }
        )
    return out


def with_conversion(crd: Obj, conversion: Conversion, endpoint: Endpoint) -> Obj:
    """A copy of ``crd`` converted by ``conversion``'s webhook (``spec.conversion.strategy: Webhook``)."""
    spec = crd.get("spec") or {}
    group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
    if (group, kind) != (conversion.group, conversion.kind):
        raise ValueError(
            f"the CRD is for {kind}.{group}, the conversion for {conversion.kind}.{conversion.group}"
        )
    served = {v["name"] for v in spec.get("versions") or []}
    missing = served - set(conversion.versions)
    if missing:
        raise ValueError(
            f"{conversion.kind} versions {', '.join(sorted(missing))} are in the CRD but not in the "
            f"conversion (it converts {', '.join(conversion.versions)}); declare a spoke for each"
        )
    out = copy.deepcopy(crd)
    out["spec"]["conversion"] = {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": endpoint.client_config(conversion.path),
            "conversionReviewVersions": ["v1"],
        },
    }
    if endpoint.annotations():
        out["metadata"].setdefault("annotations", {}).update(endpoint.annotations())
    return out
