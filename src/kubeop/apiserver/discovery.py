"""Discovery documents of an aggregated API: ``/apis`` (an APIGroupList of the one group, or the
aggregated APIGroupDiscoveryList when the Accept header asks for it: what kube-apiserver's
discovery manager merges), ``/apis/<group>`` (its APIGroup) and ``/apis/<group>/<version>`` (an
APIResourceList)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubeop.apiserver.resource import ServedResource
from kubeop.apiserver.scale import SCALE_KIND

__all__ = ["aggregated_discovery", "api_group", "api_group_list", "api_resource_list", "discovery_version"]

_SUBRESOURCE_VERBS = ("get", "patch", "update")
_AGGREGATED = "application/json;g=apidiscovery.k8s.io;v={};as=APIGroupDiscoveryList"


def api_group(group: str, version: str) -> dict[str, Any]:
    preferred = {"groupVersion": f"{group}/{version}", "version": version}
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [preferred],
        "preferredVersion": preferred,
    }


def api_group_list(group: str, version: str) -> dict[str, Any]:
    entry = api_group(group, version)
    del entry["kind"], entry["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [entry]}


def api_resource_list(group: str, version: str, resources: Sequence[ServedResource]) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}",
        "resources": [entry for r in resources for entry in r.discovery()],
    }


def core_discovery(api_version: str | None) -> tuple[dict[str, Any], str]:
    """``/api`` of a server with no core group: an empty APIGroupDiscoveryList when asked for the
    aggregated discovery (``api_version`` v2/v2beta1), else an APIVersions with no versions; so a
    client talking to this server directly (not through kube-apiserver, which owns ``/api``)
    discovers its one group instead of failing on a 404."""
    if api_version is None:
        return {"kind": "APIVersions", "versions": [], "serverAddressByClientCIDRs": []}, "application/json"
    body = {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{api_version}",
        "metadata": {},
        "items": [],
    }
    return body, _AGGREGATED.format(api_version)


def discovery_version(accept: str | None) -> str | None:
    """``v2`` or ``v2beta1`` when ``accept`` asks for the aggregated discovery first, else None."""
    for part in (accept or "").split(","):
        media, *params = (p.strip() for p in part.split(";"))
        options = dict(p.partition("=")[::2] for p in params)
        if media not in ("application/json", "*/*"):
            continue
        if options.get("as") == "APIGroupDiscoveryList" and options.get("g") == "apidiscovery.k8s.io":
            if options.get("v") in ("v2", "v2beta1"):
                return options["v"]
            continue
        return None
    return None


def aggregated_discovery(
    group: str, version: str, resources: Sequence[ServedResource], api_version: str
) -> tuple[dict[str, Any], str]:
    """The APIGroupDiscoveryList of the one group version, and its Content-Type."""
    entries = []
    for served in resources:
        decl = served.decl
        kind = {"group": group, "version": version, "kind": decl.kind}
        entry: dict[str, Any] = {
            "resource": decl.plural,
            "responseKind": kind,
            "scope": "Namespaced" if decl.namespaced else "Cluster",
            "singularResource": decl.singular,
            "verbs": served.discovery()[0]["verbs"],
        }
        if decl.short_names:
            entry["shortNames"] = list(decl.short_names)
        if decl.categories:
            entry["categories"] = list(decl.categories)
        subresources = []
        if decl.status_subresource:
            subresources.append({"subresource": "status", "responseKind": kind, "verbs": _SUBRESOURCE_VERBS})
        if decl.scale is not None:
            subresources.append(
                {"subresource": "scale", "responseKind": dict(SCALE_KIND), "verbs": _SUBRESOURCE_VERBS}
            )
        if subresources:
            entry["subresources"] = subresources
        entries.append(entry)
    body = {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{api_version}",
        "metadata": {},
        "items": [
            {
                "metadata": {"name": group},
                "versions": [{"version": version, "resources": entries, "freshness": "Current"}],
            }
        ],
    }
    return body, _AGGREGATED.format(api_version)
