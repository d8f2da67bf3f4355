"""The same operator written with kopf, for comparison (kopf installed in a separate venv).

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


def _cm(name: str, namespace: str, value: str, body: Any) -> dict[str, Any]:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"value": value},
    }
    kopf.adopt(cm, owner=body)
    return cm


@kopf.on.create("bench.kubeop.dev", "v1", "widgets")
@kopf.on.update("bench.kubeop.dev", "v1", "widgets")
@kopf.on.resume("bench.kubeop.dev", "v1", "widgets")
def ensure(spec: Any, name: str, namespace: str, body: Any, meta: Any, patch: Any, **_: Any) -> None:
    api = kubernetes.client.CoreV1Api()
    cm = _cm(name, namespace, spec["value"], body)
    try:
        api.create_namespaced_config_map(namespace, cm)
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
        api.patch_namespaced_config_map(name, namespace, {"data": {"value": spec["value"]}})
    patch.status["observedGeneration"] = meta["generation"]
    patch.status["configMap"] = name
