"""The Application CRD."""

from __future__ import annotations

from typing import Any

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "applications.apps.example.com"},
    "spec": {
        "group": "apps.example.com",
        "scope": "Namespaced",
        "names": {
            "plural": "applications",
            "singular": "application",
            "kind": "Application",
            "shortNames": ["app"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
                    {"name": "Reconciles", "type": "integer", "jsonPath": ".status.reconcileCount"},
                ],
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["template"],
                                "properties": {
                                    "replicas": {"type": "integer", "minimum": 0, "default": 1},
                                    "template": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True,
                                    },
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {
                                    "reconcileCount": {"type": "integer"},
                                    "readyReplicas": {"type": "integer"},
                                    "observedGeneration": {"type": "integer"},
                                    "conditions": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True,
                                        },
                                    },
                                },
                            },
                        },
                    }
                },
            }
        ],
    },
}


def sample(
    name: str = "web", namespace: str = "default", image: str = "nginx:1.27", replicas: int = 2
) -> dict[str, Any]:
    return {
        "apiVersion": "apps.example.com/v1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "web", "image": image}]}},
        },
    }
