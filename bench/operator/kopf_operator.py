"""The same operator written with kopf, for comparison (kopf installed in a separate venv).

Idiomatic kopf: a create handler and an update handler on the spec; the ConfigMap is adopted
(owner reference) and written with the official client; the status comes from the handler's patch.

Run: KUBECONFIG=... kopf run --standalone --all-namespaces kopf_operator.py
"""

from __future__ import annotations

from typing import Any

import kopf
import kubernetes


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    kubernetes.config.load_kube_config()
    settings.posting.enabled = False
    settings.watching.server_timeout = 300


def _status(patch: Any, meta: Any, name: str) -> None:
    patch.status["observedGeneration"] = meta["generation"]
    patch.status["configMap"] = name


@kopf.on.create("bench.kubeop.dev", "v1", "widgets")
def create(spec: Any, name: str, namespace: str, body: Any, meta: Any, patch: Any, **_: Any) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"value": spec["value"]},
    }
    kopf.adopt(cm, owner=body)
    try:
        kubernetes.client.CoreV1Api().create_namespaced_config_map(namespace, cm)
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
    _status(patch, meta, name)


@kopf.on.update("bench.kubeop.dev", "v1", "widgets", field="spec")
def update(spec: Any, name: str, namespace: str, meta: Any, patch: Any, **_: Any) -> None:
    kubernetes.client.CoreV1Api().patch_namespaced_config_map(
        name, namespace, {"data": {"value": spec["value"]}}
    )
    _status(patch, meta, name)
