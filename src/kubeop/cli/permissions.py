"""Does the cluster grant the operator what its code declares? Asked before ``kubeop run`` starts it.

An operator whose identity lacks one permission does not crash: its watch of that kind retries
with backoff, its caches never sync, and it says so only when the cache-sync timeout (minutes)
runs out. ``kubeop run`` instead asks the API server up front, with one SelfSubjectAccessReview
per verb and resource of the generated ClusterRole (and the leader-election Lease), and fails
at once naming each missing permission.

:func:`accesses` is the pure part (rules -> the questions to ask); :func:`denied` asks them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubeop.client import Client
from kubeop.core.errors import ApiError
from kubeop.core.resource import ApiResource
from kubeop.crd.rbac import PolicyRule

__all__ = ["Access", "accesses", "denied", "identity"]

_SSAR = ApiResource(
    "authorization.k8s.io", "v1", "selfsubjectaccessreviews", kind="SelfSubjectAccessReview", namespaced=False
)
_SSR = ApiResource(
    "authentication.k8s.io", "v1", "selfsubjectreviews", kind="SelfSubjectReview", namespaced=False
)


@dataclass(frozen=True)
class Access:
    """One question for the authorizer: may I ``verb`` this resource (or non-resource URL)?"""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    namespace: str = ""  # "": cluster-wide (all namespaces)
    url: str = ""

    def describe(self) -> str:
        if self.url:
            return f"{self.verb} {self.url}"
        what = self.resource + (f"/{self.subresource}" if self.subresource else "")
        what += f".{self.group}" if self.group else ""
        if self.name:
            what += f" named {self.name}"
        return f"{self.verb} {what} " + (
            f"in namespace {self.namespace}" if self.namespace else "(cluster-wide)"
        )

    def review(self) -> dict[str, Any]:
        if self.url:
            spec: dict[str, Any] = {"nonResourceAttributes": {"verb": self.verb, "path": self.url}}
        else:
            attrs = {
                "verb": self.verb,
                "group": self.group,
                "resource": self.resource,
                "subresource": self.subresource,
                "name": self.name,
                "namespace": self.namespace,
            }
            spec = {"resourceAttributes": {k: v for k, v in attrs.items() if v or k in ("group", "resource")}}
        return {"apiVersion": _SSAR.api_version, "kind": _SSAR.kind, "spec": spec}


def accesses(rules: Iterable[PolicyRule], *, namespace: str = "") -> list[Access]:
    """One :class:`Access` per verb x group x resource (x name) the rules grant, in order."""
    out: list[Access] = []
    for rule in rules:
        for url in rule.non_resource_urls:
            out.extend(Access(verb, url=url) for verb in rule.verbs)
        for group in rule.api_groups:
            for resource in rule.resources:
                plural, _, sub = resource.partition("/")
                for verb in rule.verbs:
                    names = rule.resource_names or ("",)
                    out.extend(Access(verb, group, plural, sub, name, namespace) for name in names)
    return list(dict.fromkeys(out))


async def denied(client: Client, wanted: Iterable[Access]) -> list[tuple[Access, str]]:
    """The accesses the API server does not allow to the client's identity, with its reason."""
    items = list(wanted)

    async def ask(access: Access) -> tuple[Access, bool, str]:
        review: dict[str, Any] = await client.create(access.review(), resource=_SSAR)
        status = review.get("status") or {}
        return access, bool(status.get("allowed")), str(status.get("reason") or "")

    answers = await asyncio.gather(*(ask(a) for a in items))
    return [(access, reason) for access, allowed, reason in answers if not allowed]


async def identity(client: Client) -> str:
    """Who the client is to the API server (its user name), or a description if it cannot tell."""
    try:
        body: dict[str, Any] = {"apiVersion": _SSR.api_version, "kind": _SSR.kind}
        review = await client.create(body, resource=_SSR)
    except ApiError:
        return "the kubeconfig's user"
    return str(
        ((review.get("status") or {}).get("userInfo") or {}).get("username") or "the kubeconfig's user"
    )
