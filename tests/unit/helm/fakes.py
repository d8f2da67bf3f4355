"""An in-memory cluster, cache and Helm for unit tests of the Helm reconciler.

The fake cluster is a set of informers whose stores *are* the server (writes show up in the
cache at once); the fake Helm renders a two-object chart (Service + Deployment with the image
value), stores releases as Helm's real storage Secrets (so the real ReleaseStore decodes them)
and applies objects the way Helm labels them. Every API write and every helm call is recorded.
"""

from __future__ import annotations

import base64
import copy
import gzip
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeop.cache import Indexer
from kubeop.controller import Context, Request
from kubeop.core.errors import AlreadyExists, NotFound
from kubeop.core.gvk import GroupVersionKind
from kubeop.core.resource import ApiResource
from kubeop.helm.engine import HelmError
from kubeop.helm.postrender import inject_owner_references
from kubeop.helm.releases import RELEASE_SECRETS, Release, release_from_json

PHP = ApiResource("web.example.com", "v1", "phpdeployments", kind="PhpDeployment")
DEPLOYMENTS = ApiResource("apps", "v1", "deployments", kind="Deployment")
SERVICES = ApiResource("", "v1", "services", kind="Service")
RESOURCES = {r.gvk: r for r in (PHP, DEPLOYMENTS, SERVICES, RELEASE_SECRETS)}
RESOURCES[GroupVersionKind("", "v1", "Secret")] = RELEASE_SECRETS


def _key(obj: Mapping[str, Any]) -> str:
    md = obj["metadata"]
    return f"{md['namespace']}/{md['name']}" if md.get("namespace") else str(md["name"])


def _merge(base: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping) or not isinstance(base, Mapping):
        return copy.deepcopy(patch)
    out = dict(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


class FakeInformer:
    def __init__(self) -> None:
        self.store = Indexer()
        self.handlers: list[Any] = []

    def add_indexers(self, indexers: Any) -> None:
        self.store.add_indexers(indexers)

    def add_event_handler(self, handler: Any, resync_period: float | None = None) -> Any:
        self.handlers.append(handler)
        for obj in self.store.list():
            handler.on_add(obj, True)
        return handler

    def has_synced(self) -> bool:
        return True

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        return True

    def put(self, obj: dict[str, Any]) -> None:
        old = self.store.get(_key(obj))
        self.store.add(obj)
        for h in self.handlers:
            if old is None:
                h.on_add(obj, False)
            else:
                h.on_update(old, obj)

    def remove(self, key: str) -> None:
        old = self.store.get(key)
        if old is None:
            return
        self.store.delete(old)
        for h in self.handlers:
            h.on_delete(old)


class FakeCluster:
    """The server and the cache at once: one informer per resource."""

    def __init__(self) -> None:
        self.informers: dict[ApiResource, FakeInformer] = {}
        self.writes: list[tuple[str, str, str]] = []
        self._rv = itertools.count(100)
        self._uid = itertools.count(1)
        self.normalise: set[str] = set()  # keys whose merge patches the "server" normalises away

    def informer(self, resource: ApiResource, **kwargs: Any) -> FakeInformer:
        return self.informers.setdefault(resource, FakeInformer())

    def get(self, res: ApiResource, key: str) -> dict[str, Any] | None:
        obj = self.informer(res).store.get(key)
        return copy.deepcopy(obj) if obj is not None else None

    def store(self, res: ApiResource, obj: dict[str, Any], *, record: str | None = None) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        md = obj.setdefault("metadata", {})
        md.setdefault("uid", f"uid-{next(self._uid)}")
        md["resourceVersion"] = str(next(self._rv))
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        self.informer(res).put(obj)
        if record:
            self.writes.append((record, res.kind, _key(obj)))
        return obj

    def delete(self, res: ApiResource, key: str, *, record: bool = True) -> None:
        if record:
            self.writes.append(("delete", res.kind, key))
        self.informer(res).remove(key)


@dataclass
class _List:
    items: list[dict[str, Any]]


@dataclass
class _Mapper:
    resources: list[ApiResource]


class FakeDiscovery:
    def __init__(self) -> None:
        self._mapper = _Mapper([PHP, DEPLOYMENTS, SERVICES, RELEASE_SECRETS])

    async def mapper(self) -> _Mapper:
        return self._mapper


class FakeApi:
    """The parts of kubeop.client.Client the reconciler uses."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.discovery = FakeDiscovery()
        self.dry_runs = 0

    async def create(self, obj: dict[str, Any], *, resource: ApiResource, **kw: Any) -> dict[str, Any]:
        if self.cluster.get(resource, _key(obj)) is not None:
            raise AlreadyExists("exists")
        return self.cluster.store(resource, obj, record="create")

    async def get_or_none(self, res: ApiResource, name: str, *, namespace: str | None = None) -> Any:
        return self.cluster.get(res, f"{namespace}/{name}" if namespace else name)

    async def patch(
        self,
        res: ApiResource,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
        **kw: Any,
    ) -> dict[str, Any]:
        key = f"{namespace}/{name}" if namespace else name
        live = self.cluster.get(res, key)
        if live is None:
            raise NotFound("gone")
        # A normalised key: the server stores the patched values in another form, so no change.
        merged = live if key in self.cluster.normalise else _merge(live, body)
        if dry_run:
            self.dry_runs += 1
            return merged
        return self.cluster.store(res, merged, record="patch")

    async def list(self, res: ApiResource, *, namespace: str, label_selector: str) -> _List:
        wanted = dict(part.split("=") for part in label_selector.split(","))
        items = [
            o
            for o in self.cluster.informer(res).store.list()
            if o["metadata"].get("namespace") == namespace
            and all(o["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
        ]
        return _List(items)

    async def delete(self, res: ApiResource, name: str, *, namespace: str | None = None) -> None:
        key = f"{namespace}/{name}" if namespace else name
        if self.cluster.get(res, key) is None:
            raise NotFound("gone")
        self.cluster.delete(res, key)


class FakeReconcilerClient:
    """The parts of kubeop.controller.ReconcilerClient the reconciler uses."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.cache = cluster
        self.api = FakeApi(cluster)

    async def resource(self, what: Any) -> ApiResource:
        if isinstance(what, ApiResource):
            return what
        return RESOURCES[what]

    async def get(self, what: Any, name: str, *, namespace: str | None = None) -> Any:
        res = await self.resource(what)
        obj = self.cluster.informer(res).store.get(f"{namespace}/{name}" if namespace else name)
        return obj

    async def patch_status(self, obj: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
        from kubeop.controller import contains

        current = self.cluster.get(PHP, _key(obj))
        if current is None:
            return False
        if contains(current.get("status") or {}, status):
            return False
        current["status"] = _merge(current.get("status") or {}, dict(status))
        self.cluster.store(PHP, current, record="status")
        return True

    async def add_finalizer(self, obj: Mapping[str, Any], finalizer: str) -> bool:
        current = self.cluster.get(PHP, _key(obj))
        assert current is not None
        fins = current["metadata"].setdefault("finalizers", [])
        if finalizer in fins:
            return False
        fins.append(finalizer)
        self.cluster.store(PHP, current, record="finalizer")
        return True

    async def remove_finalizer(self, obj: Mapping[str, Any], finalizer: str) -> bool:
        current = self.cluster.get(PHP, _key(obj))
        if current is None:
            return False
        fins = current["metadata"].get("finalizers") or []
        if finalizer not in fins:
            return False
        fins.remove(finalizer)
        if not fins and current["metadata"].get("deletionTimestamp"):
            self.cluster.delete(PHP, _key(obj))
        else:
            self.cluster.store(PHP, current, record="finalizer")
        return True


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def event(self, regarding: Any, type: str, reason: str, note: str, **kw: Any) -> None:
        self.events.append((type, reason, note))


def release_secret(
    ns: str, name: str, version: int, status: str, manifest: str, values: Any, notes: str = ""
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A release as Helm records it: its JSON document and the storage Secret that holds it."""
    doc = {
        "name": name,
        "namespace": ns,
        "version": version,
        "info": {"status": status, "notes": notes, "description": status},
        "chart": {"metadata": {"name": "php", "version": "0.1.0"}},
        "config": values,
        "manifest": manifest,
    }
    encoded = base64.b64encode(gzip.compress(json.dumps(doc).encode())).decode()
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"sh.helm.release.v1.{name}.v{version}",
            "namespace": ns,
            "labels": {"owner": "helm", "name": name, "status": status, "version": str(version)},
        },
        "type": "helm.sh/release.v1",
        "data": {"release": base64.b64encode(encoded.encode()).decode()},
    }
    return doc, secret


@dataclass
class FakeHelm:
    """A Helm that renders a Service + Deployment from ``image`` (and ``replicas``).

    ``image: ""`` is a template error (nothing is recorded); ``fail_apply`` makes the next
    install or upgrade fail after Helm recorded a failed revision, as a refused object does.
    """

    cluster: FakeCluster
    calls: list[tuple[str, ...]] = field(default_factory=list)
    fail_apply: bool = False

    def render(self, name: str, values: Mapping[str, Any], op: str) -> str:
        if not values.get("image"):
            raise HelmError(
                op, "execution error at (php/templates/deployment.yaml:9:20): spec.image is required", 1
            )
        return (
            "---\n# Source: php/templates/service.yaml\n"
            f"apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n"
            "spec:\n  ports:\n    - port: 80\n"
            "---\n# Source: php/templates/deployment.yaml\n"
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n"
            f"  name: {name}\nspec:\n  replicas: {int(values.get('replicas', 1))}\n  template:\n    spec:\n"
            f"      containers:\n        - name: php\n          image: {json.dumps(values['image'])}\n"
        )

    def _history(self, ns: str, name: str) -> list[dict[str, Any]]:
        return [
            s
            for s in self.cluster.informer(RELEASE_SECRETS).store.list()
            if s["metadata"].get("namespace") == ns and s["metadata"]["labels"]["name"] == name
        ]

    def _record(
        self, ns: str, name: str, version: int, status: str, manifest: str, values: Any, notes: str = ""
    ) -> Release:
        doc, secret = release_secret(ns, name, version, status, manifest, values, notes)
        self.cluster.store(RELEASE_SECRETS, secret)
        return release_from_json(doc)

    def _set_status(self, secret: dict[str, Any], status: str) -> None:
        from kubeop.helm.releases import decode_release

        doc = decode_release(base64.b64decode(secret["data"]["release"]))
        self._record(
            secret["metadata"]["namespace"],
            doc["name"],
            doc["version"],
            status,
            doc["manifest"],
            doc["config"],
        )

    def _apply(self, ns: str, name: str, manifest: str) -> None:
        from kubeop.helm.manifest import parse_manifest

        for obj in parse_manifest(manifest):
            res = RESOURCES[GroupVersionKind.from_api_version(obj["apiVersion"], obj["kind"])]
            live = self.cluster.get(res, f"{ns}/{obj['metadata']['name']}")
            want = copy.deepcopy(obj)
            md = want["metadata"]
            md["namespace"] = ns
            md.setdefault("labels", {})["app.kubernetes.io/managed-by"] = "Helm"
            md.setdefault("annotations", {}).update(
                {"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": ns}
            )
            if live is not None:
                want["metadata"]["uid"] = live["metadata"]["uid"]
            self.cluster.store(res, want)

    @staticmethod
    def _post_render(manifest: str, spec: str | None) -> str:
        if spec is None:
            return manifest
        s = json.loads(spec)
        return inject_owner_references(manifest, s["owner"], s["namespace"], frozenset(s["namespacedKinds"]))

    async def install(
        self, name: str, ns: str, chart: Any, values: Mapping[str, Any], *, post_renderer: str | None = None
    ) -> Release:
        self.calls.append(("install", name))
        manifest = self._post_render(self.render(name, values, "install"), post_renderer)
        if self.fail_apply:
            self.fail_apply = False
            self._record(ns, name, 1, "failed", manifest, dict(values))
            raise HelmError("install", 'INSTALLATION FAILED: Deployment "x" is invalid', 1)
        self._apply(ns, name, manifest)
        return self._record(ns, name, 1, "deployed", manifest, dict(values), notes="notes")

    async def upgrade(
        self,
        name: str,
        ns: str,
        chart: Any,
        values: Mapping[str, Any],
        *,
        force: bool = False,
        dry_run: bool = False,
        post_renderer: str | None = None,
    ) -> Release:
        self.calls.append(("dry-run" if dry_run else ("upgrade-force" if force else "upgrade"), name))
        history = self._history(ns, name)
        version = max(int(s["metadata"]["labels"]["version"]) for s in history) + 1
        manifest = self._post_render(self.render(name, values, "upgrade"), post_renderer)
        if dry_run:
            return Release(name, ns, version, "pending-upgrade", manifest, dict(values))
        if self.fail_apply:
            self.fail_apply = False
            self._record(ns, name, version, "failed", manifest, dict(values))
            raise HelmError("upgrade", 'UPGRADE FAILED: cannot patch "x" with kind Deployment', 1)
        for s in history:
            if s["metadata"]["labels"]["status"] == "deployed":
                self._set_status(s, "superseded")
        self._apply(ns, name, manifest)
        return self._record(ns, name, version, "deployed", manifest, dict(values), notes="notes")

    async def rollback(self, name: str, ns: str, revision: int, *, force: bool = False) -> None:
        from kubeop.helm.releases import release_from_secret

        self.calls.append(("rollback", name, str(revision), str(force)))
        history = self._history(ns, name)
        target = next(
            release_from_secret(s) for s in history if s["metadata"]["labels"]["version"] == str(revision)
        )
        version = max(int(s["metadata"]["labels"]["version"]) for s in history) + 1
        for s in history:
            if s["metadata"]["labels"]["status"] == "deployed":
                self._set_status(s, "superseded")
        self._apply(ns, name, target.manifest)
        self._record(ns, name, version, "deployed", target.manifest, dict(target.config))

    async def uninstall(self, name: str, ns: str, *, wait: bool = False) -> None:
        from kubeop.helm.manifest import parse_manifest
        from kubeop.helm.releases import release_from_secret

        self.calls.append(("uninstall", name))
        history = self._history(ns, name)
        for s in history:
            rel = release_from_secret(s)
            if rel.deployed:
                for obj in parse_manifest(rel.manifest):
                    res = RESOURCES[GroupVersionKind.from_api_version(obj["apiVersion"], obj["kind"])]
                    self.cluster.delete(res, f"{ns}/{obj['metadata']['name']}", record=False)
        for s in history:
            self.cluster.delete(RELEASE_SECRETS, _key(s), record=False)

    def close(self) -> None:
        pass


def context(client: FakeReconcilerClient, name: str, namespace: str, recorder: FakeRecorder) -> Context:
    return Context(Request(namespace, name), client, recorder, "phpdeployment-controller")  # type: ignore[arg-type]
