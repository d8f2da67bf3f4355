"""Two namings of one kind share one informer and one watch on the real API server."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import pytest

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client
from kubeop.client.watch import WatchEvent
from kubeop.core.request import ApiRequest
from kubeop.kinds import ConfigMap

from .e2e_cache_support import CM, eventually

pytestmark = pytest.mark.controlplane


async def test_names_a_model_and_a_resource_of_one_kind_open_one_watch(
    client: Client, namespace: str
) -> None:
    opened: list[str] = []
    stream = client.transport.stream

    def counting(req: ApiRequest) -> AsyncGenerator[WatchEvent[dict[str, Any]], None]:
        if req.path.endswith("/configmaps"):
            opened.append(str(req))
        return stream(req)

    client.transport.stream = counting  # type: ignore[method-assign]
    async with SharedInformerFactory(client) as factory:
        first = factory.informer("cm", namespace=namespace)  # before discovery: keyed by the name
        assert await factory.wait_for_cache_sync(timeout=30)
        for other in ("configmaps", "ConfigMap", "configmaps.v1.", CM, ConfigMap):
            assert factory.informer(other, namespace=namespace) is first, other
        assert factory.informers == [first]
        await eventually(lambda: opened, within=10, what="the informer's watch")
    assert len(opened) == 1, opened
