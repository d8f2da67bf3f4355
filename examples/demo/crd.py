"""The Demo CRD (seed 000's operator-sdk example, group yuerblog.cc)."""

from __future__ import annotations

from typing import Any

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "demos.yuerblog.cc"},
    "spec": {
        "group": "yuerblog.cc",
        "scope": "Namespaced",
        "names": {"plural": "demos", "singular": "demo", "kind": "Demo"},
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
                            "spec": {
                                "type": "object",
                                "properties": {"image": {"type": "string", "default": "busybox"}},
                            },
                            "status": {
                                "type": "object",
                                "properties": {"pod": {"type": "string"}, "phase": {"type": "string"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


def sample(name: str = "demo", namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "yuerblog.cc/v1",
        "kind": "Demo",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {},
    }
