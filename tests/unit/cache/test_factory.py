"""SharedInformerFactory: sharing, lifecycle and the public names of kubeop.cache."""

from __future__ import annotations

import ast
import logging
import pathlib
import types
from collections.abc import AsyncIterator
from typing import ClassVar

import pytest

import kubeop.cache
from kubeop.cache import Informer, SharedInformerFactory, WatcherConfig, compact
from kubeop.client import Client, ClientConfig
from kubeop.core import ApiResource, GroupVersionKind

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


class ConfigMapModel:
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "ConfigMap"

    @classmethod
    def model_validate(cls, data: dict[str, object]) -> ConfigMapModel:
        return cls()

    def model_dump(self) -> dict[str, object]:
        return {}


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    # Nothing listens on port 9: informers that start fail to connect and back off.
    async with Client(ClientConfig(server="http://127.0.0.1:9", qps=None, max_retries=0)) as c:
        yield c


async def test_one_informer_per_resource_namespace_selectors_and_mode(client: Client) -> None:
    factory = SharedInformerFactory(client)
    cm = factory.informer(CM)
    assert factory.informer(CM) is cm
    assert factory.informer(GroupVersionKind("", "v1", "ConfigMap")) is cm
    assert factory.informer(ConfigMapModel) is cm
    assert factory.informer(CM, namespace="x") is not cm
    assert factory.informer(CM, namespace="x") is factory.informer(CM, namespace="x")
    assert factory.informer(CM, label_selector={"app": "web"}) is factory.informer(
        CM, label_selector="app=web"
    )
    assert factory.informer(CM, metadata_only=True) is not cm
    assert factory.informer("configmaps") is factory.informer("ConfigMaps")
    assert len(factory.informers) == 5
    assert all(isinstance(i, Informer) for i in factory.informers)


async def test_options_reach_the_informers(client: Client) -> None:
    factory = SharedInformerFactory(
        client, resync_period=30, page_size=100, config=WatcherConfig(stall_timeout=5)
    )
    informer = factory.informer(CM)
    assert informer.watcher.config.page_size == 100
    assert informer.watcher.config.stall_timeout == 5
    assert informer.watcher.config.transform is compact
    assert informer.add_event_handler(kubeop.cache.FuncHandler()).resync_period == 30
    raw = SharedInformerFactory(client, transform=None).informer(CM)
    assert raw.watcher.config.transform is None


async def test_start_wait_stop(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="kubeop.cache")
    factory = SharedInformerFactory(client)
    early = factory.informer(CM)
    assert not early.started
    async with factory:
        assert early.started
        late = factory.informer(CM, namespace="late")
        assert late.started  # created after start: started at once
        assert await factory.wait_for_cache_sync(timeout=0.05) is False  # nothing to connect to
    with pytest.raises(RuntimeError):
        factory.informer(CM, namespace="after-stop")
    with pytest.raises(RuntimeError):
        factory.start()
    assert await SharedInformerFactory(client).wait_for_cache_sync() is True  # nothing started


def test_all_is_complete() -> None:
    public = {
        name
        for name, value in vars(kubeop.cache).items()
        if name.isidentifier() and not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert len(set(kubeop.cache.__all__)) == len(kubeop.cache.__all__)
    assert set(kubeop.cache.__all__) == public
    # The entry points named after their modules are the functions, not the modules.
    assert callable(kubeop.cache.watcher) and callable(kubeop.cache.reflector)


def test_imports_stay_below_the_cache_layer() -> None:
    package = pathlib.Path(kubeop.cache.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kubeop"):
                assert node.module.startswith(("kubeop.cache", "kubeop.core", "kubeop.client")), (
                    path.name,
                    node.module,
                )
