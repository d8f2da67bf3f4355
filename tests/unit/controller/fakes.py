"""The cache and API side of controller tests on a FakeCluster (:class:`ClusterCache`,
:class:`ClusterApi`), and an in-memory informer factory (:class:`FakeFactory`) for the tests that
need a cache the test holds stale or fills by hand, which a watch cannot do on demand."""

from __future__ import annotations

import copy
from typing import Any

import orjson

from kubeop.cache import BackoffConfig, SharedInformerFactory, WatcherConfig
from kubeop.client import Client
from kubeop.controller import Controller
from kubeop.controller.running import ControllerRuntime, RunningController
from kubeop.core.errors import AlreadyExists
from kubeop.core.gvk import GroupVersionKind
from kubeop.core.patch import PatchType
from kubeop.core.resource import ApiResource
from kubeop.testing import FakeCluster
from kubeop.testing.fake import SteppableClock


class FakeStore:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def get_by_key(self, key: str) -> dict[str, Any] | None:
        return self.objects.get(key)

    def list(self) -> list[dict[str, Any]]:
        return list(self.objects.values())

    def by_index(self, index: str, value: str) -> list[dict[str, Any]]:
        assert index == "namespace"
        return [o for o in self.objects.values() if o["metadata"].get("namespace") == value]


class FakeRegistration:
    def __init__(self, informer: FakeInformer) -> None:
        self.informer = informer

    def has_synced(self) -> bool:
        return self.informer.synced


class FakeInformer:
    def __init__(self) -> None:
        self.store = FakeStore()
        self.handlers: list[Any] = []
        self.synced = True
        self.applied_rv = 0  # the newest resourceVersion applied to the store

    def has_applied(self, resource_version: str) -> bool:
        return resource_version.isdigit() and self.applied_rv >= int(resource_version)

    def _saw(self, obj: dict[str, Any]) -> None:
        rv = obj["metadata"].get("resourceVersion") or ""
        if rv.isdigit():
            self.applied_rv = max(self.applied_rv, int(rv))

    def add_event_handler(self, handler: Any, resync_period: float | None = None) -> FakeRegistration:
        self.handlers.append(handler)
        for obj in self.store.list():
            handler.on_add(obj, True)
        return FakeRegistration(self)

    def remove_event_handler(self, reg: Any) -> None:
        pass

    def has_synced(self) -> bool:
        return self.synced

    async def wait_for_sync(self) -> bool:
        return True

    @staticmethod
    def _key(obj: dict[str, Any]) -> str:
        md = obj["metadata"]
        return f"{md['namespace']}/{md['name']}" if md.get("namespace") else md["name"]

    def add(self, obj: dict[str, Any]) -> None:
        self.store.objects[self._key(obj)] = obj
        self._saw(obj)
        for h in self.handlers:
            h.on_add(obj, False)

    def update(self, obj: dict[str, Any]) -> None:
        old = self.store.objects[self._key(obj)]
        self.store.objects[self._key(obj)] = obj
        self._saw(obj)
        for h in self.handlers:
            h.on_update(old, obj)

    def delete(self, obj: dict[str, Any]) -> None:
        self.store.objects.pop(self._key(obj), None)
        self._saw(obj)
        for h in self.handlers:
            h.on_delete(obj)


class FakeFactory:
    def __init__(self) -> None:
        self.informers: dict[ApiResource, FakeInformer] = {}

    def informer(self, resource: ApiResource, **kwargs: Any) -> FakeInformer:
        return self.informers.setdefault(resource, FakeInformer())

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


APPS = ApiResource("example.com", "v1", "apps", kind="App")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def app(name: str, ns: str = "default", generation: int = 1, rv: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "App",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "generation": generation,
            "resourceVersion": rv,
        },
        "spec": {"x": generation},
    }


APP_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "apps.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "apps", "singular": "app", "kind": "App"},
        "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}}],
    },
}


class ClusterCache:
    """A fake cluster (the App CRD served unless ``crd=False``; no garbage collector, so objects
    may name owners that do not exist), a client of it and the informer factory over it."""

    def __init__(self, *, crd: bool = True, clock: SteppableClock | None = None) -> None:
        self.cluster = FakeCluster(garbage_collection=False, clock=clock)
        if crd:
            self.cluster.add_crd(APP_CRD)
        self.client = self.cluster.client()
        fast = WatcherConfig(backoff=BackoffConfig(initial=0.01, cap=0.05, jitter=0.0))
        self.factory = SharedInformerFactory(self.client, config=fast)
        self._namespaces = {"default"}

    async def add(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` (its uid, resourceVersion and generation are the server's to give) and
        make sure its kind is watched."""
        body = copy.deepcopy(obj)
        md = body["metadata"]
        for field in ("uid", "resourceVersion", "generation"):
            md.pop(field, None)
        ns = md.get("namespace")
        if ns and ns not in self._namespaces:
            self._namespaces.add(ns)
            await self.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        created = await self.client.create(body)
        if body["kind"] != "Namespace":
            # Its kind's informer exists and has listed, as FakeFactory.informer(...).add(...)
            # left it: a controller started next finds its cache synced.
            informer = self.factory.informer(await self.client.resource(GroupVersionKind.of(body)))
            await informer.wait_for_sync(5)
        return created

    async def close(self) -> None:
        await self.factory.stop()
        await self.client.close()

    async def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj``, or replace its spec."""
        try:
            return await self.add(obj)
        except AlreadyExists:
            res = await self.client.resource(GroupVersionKind.of(obj))
            md = obj["metadata"]
            return await self.client.patch(
                res, md["name"], {"spec": obj["spec"]}, namespace=md.get("namespace"), type=PatchType.MERGE
            )


class ClusterApi:
    """The API side of a test: a fake cluster, a client of it, and the writes that client sent."""

    def __init__(self) -> None:
        self.cluster = FakeCluster()
        self.cluster.add_crd(APP_CRD)
        self.transport = self.cluster.transport()
        self.client = Client(transport=self.transport)

    @property
    def writes(self) -> list[tuple[str, Any]]:
        """(method[/subresource], body) of every write, in order; a DELETE's body is left out."""
        out = []
        for req in self.transport.sent:
            if req.method in ("POST", "PUT", "PATCH"):
                sub = "/status" if req.path.endswith("/status") else ""
                out.append((req.method + sub, orjson.loads(req.body or b"null")))
        return out

    async def seed_update(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Change ``obj`` in the cluster behind the client's back (whatever its resourceVersion)."""
        async with self.cluster.client() as other:
            current = await other.get(
                await other.resource(GroupVersionKind.of(obj)), obj["metadata"]["name"], namespace="default"
            )
            body = copy.deepcopy(obj)
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            return await other.update(body)

    async def seed(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` in the cluster behind the client's back (not counted as a write)."""
        async with self.cluster.client() as other:
            body = copy.deepcopy(obj)
            for field in ("uid", "resourceVersion", "generation"):
                body["metadata"].pop(field, None)
            return await other.create(body)


async def run(description: Controller, runtime: ControllerRuntime) -> RunningController:
    """A run of ``description`` as a manager makes it, started (stop it with ``.stop()``)."""
    running = RunningController(description, runtime)
    await running.start()
    return running
