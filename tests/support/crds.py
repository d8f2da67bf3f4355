"""The Widget CustomResourceDefinition of the tests and the benchmarks, in one place.

A namespaced kind, version v1, with a status subresource: ``spec.value`` a string (or any spec),
the status free-form. bench/operator, bench/scale and bench/sharding use group
``bench.kubeop.dev``, the fault tests ``faults.kubeop.dev``, the kopf e2e its own kind.
"""

from __future__ import annotations

from typing import Any

__all__ = ["widget_crd"]


def widget_crd(
    group: str, *, plural: str = "widgets", kind: str = "Widget", free_spec: bool = False
) -> dict[str, Any]:
    """The CRD of ``kind`` (``plural``) in ``group``; ``free_spec``: any spec, not ``value``."""
    spec: dict[str, Any] = (
        {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if free_spec
        else {"type": "object", "properties": {"value": {"type": "string"}}}
    )
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": spec,
                                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            },
                        }
                    },
                }
            ],
        },
    }
