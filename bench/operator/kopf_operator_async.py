"""The Widget operator written with kopf, async handlers and one kept-alive client.

The same behaviour as kopf_operator.py (a create handler and an update handler on the spec; the
ConfigMap is adopted and written; the status comes from the handler's patch), but the handlers
are coroutines and write the ConfigMap through ONE client made at startup and kept in ``memo``,
so the benchmark measures the framework rather than the child-writing client: kopf_operator.py
builds a new ``CoreV1Api()`` per call, a new connection and TLS handshake each (2.8 ms of CPU
per call, kopf_handler_cost.py), which dwarfs either framework's own work.

The client is kubeop's async ``Client``, a plain library here: real kopf runs these handlers on
its own event loop, kubeop.kopf on kubeop's; both get the same client and the same requests, so
the client's cost is the same on both sides (see RESULTS.md, "kopf-async", for why this one).

Run: KUBECONFIG=... kopf run --standalone --all-namespaces kopf_operator_async.py
"""

from __future__ import annotations

import contextlib
from typing import Any

import kopf

from kubeop.client import Client, load_config
from kubeop.core.errors import AlreadyExists
from kubeop.core.resource import ApiResource

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    settings.posting.enabled = False
    settings.watching.server_timeout = 300
    memo.client = Client(load_config().with_options(qps=None))


@kopf.on.cleanup()
async def close(memo: Any, **_: Any) -> None:
    await memo.client.close()


def _status(patch: Any, meta: Any, name: str) -> None:
    patch.status["observedGeneration"] = meta["generation"]
    patch.status["configMap"] = name


@kopf.on.create("bench.kubeop.dev", "v1", "widgets")
async def create(
    spec: Any, name: str, namespace: str, body: Any, meta: Any, patch: Any, memo: Any, **_: Any
) -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"value": spec["value"]},
    }
    kopf.adopt(cm, owner=body)
    with contextlib.suppress(AlreadyExists):  # a retried handler: it is there
        await memo.client.create(cm, resource=CONFIGMAPS)
    _status(patch, meta, name)


@kopf.on.update("bench.kubeop.dev", "v1", "widgets", field="spec")
async def update(spec: Any, name: str, namespace: str, meta: Any, patch: Any, memo: Any, **_: Any) -> None:
    await memo.client.patch(CONFIGMAPS, name, {"data": {"value": spec["value"]}}, namespace=namespace)
    _status(patch, meta, name)
