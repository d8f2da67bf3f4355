"""In-memory stand-ins for the shared informer factory (unit tests of controller logic only)."""

from __future__ import annotations

from typing import Any

from kubeop.core.resource import ApiResource


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
