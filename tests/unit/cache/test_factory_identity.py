"""Two namings of one kind share one informer and one watch (FakeCluster, watches counted)."""

from __future__ import annotations

import asyncio

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client
from kubeop.core import ApiResource, GroupVersionKind
from kubeop.kinds import ConfigMap
from kubeop.testing import FakeCluster
from kubeop.testing.fake import FakeTransport

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def _watches(api: Client) -> int:
    transport = api.transport
    assert isinstance(transport, FakeTransport)
    return sum(1 for req in transport.sent if ("watch", "true") in req.query or ("watch", "1") in req.query)


async def _synced(factory: SharedInformerFactory) -> None:
    assert await factory.wait_for_cache_sync(5)


async def test_names_models_and_resources_of_one_kind_share_one_watch() -> None:
    async with FakeCluster().client() as api:
        await api.resource("configmaps")  # discovery loaded, as a manager's controllers do first
        factory = SharedInformerFactory(api)
        first = factory.informer("configmaps")
        for other in (
            "cm",
            "ConfigMap",
            "configmaps.v1.",
            CM,
            ConfigMap,
            GroupVersionKind("", "v1", "ConfigMap"),
        ):
            assert factory.informer(other) is first, other
        assert factory.informer(CM, namespace="x") is not first
        factory.start()
        try:
            await _synced(factory)
            assert len(factory.informers) == 2
            assert _watches(api) == 2  # one per informer: the cluster-wide one and namespace x
        finally:
            await factory.stop()


async def test_a_name_asked_for_before_discovery_is_found_by_other_namings_once_it_resolves() -> None:
    async with FakeCluster().client() as api:
        factory = SharedInformerFactory(api)
        early = factory.informer("cm")  # no discovery yet: keyed by the name
        factory.start()
        try:
            await _synced(factory)  # starting it resolved the name (discovery loaded)
            assert factory.informer(ConfigMap) is early
            assert factory.informer("configmaps") is early
            assert factory.informer("cm") is early
            assert len(factory.informers) == 1
            await asyncio.sleep(0)
            assert _watches(api) == 1
        finally:
            await factory.stop()
