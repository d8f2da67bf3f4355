"""Discovery documents of an aggregated API: ``/apis`` (an APIGroupList of the one group),
``/apis/<group>`` (its APIGroup) and ``/apis/<group>/<version>`` (an APIResourceList), the
unaggregated form that kube-apiserver's aggregator reads from a server that offers no other."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kubeop.apiserver.resource import ServedResource

__all__ = ["api_group", "api_group_list", "api_resource_list"]


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
