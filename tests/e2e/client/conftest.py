"""Fixtures for the client's tests on the real control plane."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from kubeop.client import Client, load_kubeconfig

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.e2e.kubeop.dev"},
    "spec": {
        "group": "e2e.kubeop.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wdg"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {
                    "status": {},
                    "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
                },
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "size": {"type": "integer", "minimum": 0},
                                    "replicas": {"type": "integer"},
                                    "color": {"type": "string"},
                                },
                            },
                            "status": {
                                "type": "object",
                                "properties": {"phase": {"type": "string"}, "replicas": {"type": "integer"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture
async def client(kubeconfig_path: str, namespace: str) -> AsyncIterator[Client]:
    """An admin client whose default namespace is the test's fresh namespace."""
    async with Client(load_kubeconfig(kubeconfig_path, namespace=namespace, qps=None)) as c:
        yield c


@pytest.fixture(scope="session")
def widget_crd(control_plane: Any) -> str:
    control_plane.install_crds([WIDGET_CRD])
    return "widgets.e2e.kubeop.dev"


@pytest.fixture
def eventually() -> Callable[..., Awaitable[Any]]:
    """``await eventually(check, within=30, what="...")``: poll until ``check()`` is truthy."""
    return _eventually


async def _eventually(
    check: Callable[[], Awaitable[Any]], *, within: float = 30.0, what: str = "condition"
) -> Any:
    """Poll ``check`` until it returns something truthy."""
    deadline = time.monotonic() + within
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:.0f} s waiting for {what}")
        await asyncio.sleep(0.1)
