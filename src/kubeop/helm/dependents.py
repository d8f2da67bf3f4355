"""A release's objects: watch them, and put them back as the deployed manifest says.

Watches are added as releases show which kinds they contain (one informer per kind for the whole
process, shared with anything else that watches the kind). Each informer selects
``app.kubernetes.io/managed-by=Helm``, the label Helm puts on everything it creates, so the
operator caches release objects only, not every Deployment of the cluster.

An event is mapped to the custom resource that controls the object (its controller owner
reference, which the post-renderer set), or, for an object that cannot carry one (cluster-scoped,
or in another namespace), to the release named by Helm's ``meta.helm.sh/release-name`` and
``-namespace`` annotations. Like operator-sdk's dependent predicate, creations and updates that
touch only ``status`` (or the resourceVersion) are ignored: a Deployment's replica counts moving
must not reconcile its release; deletions and edits of the content do.

:meth:`DependentWatches.restore` makes the objects match the deployed manifest from the cache:
a missing object is created, one whose fields differ from the manifest is patched (JSON merge
patch of the manifest's fields; fields the manifest does not set are left alone), and an
object that matches costs no request. When the comparison says "differs" only because the
server normalises a value (``cpu: 0.5`` is stored as ``500m``), a server-side dry run of the
patch shows that nothing would change; that answer is remembered for the object's
resourceVersion, so a steady state sends nothing.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubeop.cache import DeletedFinalStateUnknown, FuncHandler, Informer, SharedInformerFactory
from kubeop.client import Client
from kubeop.controller import Request, contains
from kubeop.core.errors import AlreadyExists, NotFound
from kubeop.core.patch import PatchType
from kubeop.core.resource import ApiResource

__all__ = [
    "HELM_MANAGED_SELECTOR",
    "RELEASE_NAMESPACE_ANNOTATION",
    "RELEASE_NAME_ANNOTATION",
    "DependentWatches",
    "Restored",
    "dependent_changed",
    "desired_object",
    "owner_requests",
]

log = logging.getLogger("kubeop.helm")

HELM_MANAGED_LABEL = "app.kubernetes.io/managed-by"
HELM_MANAGED_SELECTOR = f"{HELM_MANAGED_LABEL}=Helm"
RELEASE_NAME_ANNOTATION = "meta.helm.sh/release-name"
RELEASE_NAMESPACE_ANNOTATION = "meta.helm.sh/release-namespace"

_VOLATILE_METADATA = ("resourceVersion", "managedFields", "generation")


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` without status and the metadata every write changes."""
    out = {k: v for k, v in obj.items() if k != "status"}
    md = obj.get("metadata")
    if isinstance(md, Mapping):
        out["metadata"] = {k: v for k, v in md.items() if k not in _VOLATILE_METADATA}
    return out


def dependent_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Did an update change more than status and resourceVersion/managedFields/generation?"""
    return _content(old) != _content(new)


def owner_requests(obj: Mapping[str, Any], group: str, kind: str) -> list[Request]:
    """The custom resources an event on ``obj`` concerns (see the module docstring)."""
    md = obj.get("metadata") or {}
    refs = md.get("ownerReferences") or ()
    controlled = False
    out: list[Request] = []
    for ref in refs:
        if not ref.get("controller"):
            continue
        controlled = True
        api_version = ref.get("apiVersion") or ""
        ref_group = api_version.rpartition("/")[0] if "/" in api_version else ""
        if ref.get("kind") == kind and ref_group == group:
            out.append(Request(md.get("namespace") or "", ref.get("name") or ""))
    if out or controlled:
        return out
    annotations = md.get("annotations") or {}
    release = annotations.get(RELEASE_NAME_ANNOTATION)
    if release:
        return [Request(annotations.get(RELEASE_NAMESPACE_ANNOTATION) or md.get("namespace") or "", release)]
    return []


def desired_object(
    obj: Mapping[str, Any], release: str, namespace: str, *, namespaced: bool
) -> dict[str, Any]:
    """A manifest object as it must exist: in the release's namespace (if namespaced) and with
    the label and annotations Helm adds when it creates objects (without them the next
    ``helm upgrade`` would refuse to adopt the object)."""
    out = copy.deepcopy(dict(obj))
    md = out.setdefault("metadata", {})
    if namespaced:
        md["namespace"] = md.get("namespace") or namespace
    else:
        md.pop("namespace", None)
    md["labels"] = {**(md.get("labels") or {}), HELM_MANAGED_LABEL: "Helm"}
    md["annotations"] = {
        **(md.get("annotations") or {}),
        RELEASE_NAME_ANNOTATION: release,
        RELEASE_NAMESPACE_ANNOTATION: namespace,
    }
    return out


@dataclass(frozen=True)
class Restored:
    """One repair: ``action`` is ``created`` or ``patched``."""

    action: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.action} {self.kind} {where}{self.name}"


class DependentWatches:
    """The informers over a controller's release objects, and the repairs made from them.

    ``enqueue`` receives the requests of relevant events; None caches the objects without
    reconciling on their changes (``watchDependentResources: false``: repairs then happen at the
    reconcile period only). With ``namespace``, namespaced kinds are watched in it only.
    """

    def __init__(
        self,
        cache: SharedInformerFactory,
        api: Client,
        owner_group: str,
        owner_kind: str,
        enqueue: Callable[[Request], None] | None,
        *,
        namespace: str | None = None,
    ) -> None:
        self._cache = cache
        self._namespace = namespace
        self._api = api
        self._group = owner_group
        self._kind = owner_kind
        self._enqueue = enqueue
        self._informers: dict[ApiResource, Informer] = {}
        self._normalised: dict[tuple[str, str], str] = {}
        self._lock = asyncio.Lock()

    @property
    def resources(self) -> list[ApiResource]:
        """The kinds of the releases' objects being watched."""
        return list(self._informers)

    async def watch(self, resources: Iterable[ApiResource], timeout: float = 60.0) -> None:
        """Make sure each resource is watched (first call per kind starts or joins an informer)
        and its cache has synced."""
        added = []
        async with self._lock:
            for res in resources:
                if res in self._informers:
                    continue
                informer = self._cache.informer(
                    res,
                    namespace=self._namespace if res.namespaced else None,
                    label_selector=HELM_MANAGED_SELECTOR,
                )
                if self._enqueue is not None:
                    informer.add_event_handler(self._handler())
                self._informers[res] = informer
                added.append(res)
                log.info(
                    "watching dependent resource %s for %s",
                    res.display_name,
                    self._kind,
                    extra={"controller": self._kind.lower()},
                )
        for res in added:
            if not await self._informers[res].wait_for_sync(timeout):
                raise TimeoutError(f"the cache of {res.display_name} did not sync within {timeout:.0f} s")

    def _handler(self) -> FuncHandler:
        group, kind = self._group, self._kind
        enqueue = self._enqueue
        assert enqueue is not None

        def on_update(old: Any, new: Any) -> None:
            if old is new or not dependent_changed(old, new):
                return
            for req in owner_requests(new, group, kind):
                enqueue(req)

        def on_delete(obj: Any) -> None:
            if isinstance(obj, DeletedFinalStateUnknown):
                obj = obj.obj
                if obj is None:
                    return
            for req in owner_requests(obj, group, kind):
                enqueue(req)

        return FuncHandler(on_update=on_update, on_delete=on_delete)

    def cached(self, res: ApiResource, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The cached object of kind ``res`` named ``namespace/name``, or None (not cached, or its kind not
        watched).
        """
        informer = self._informers.get(res)
        if informer is None:
            return None
        key = f"{namespace}/{name}" if res.namespaced and namespace else name
        obj: Mapping[str, Any] | None = informer.store.get_by_key(key)
        return obj

    async def restore(
        self,
        objects: Sequence[tuple[ApiResource, Mapping[str, Any]]],
        release: str,
        namespace: str,
    ) -> list[Restored]:
        """Create missing objects and patch drifted ones (see the module docstring).

        ``objects`` pairs each manifest object with its resource (which must be watched). Objects
        being deleted are left alone: their deletion event brings the release back here.
        """
        done: list[Restored] = []
        for res, obj in objects:
            want = desired_object(obj, release, namespace, namespaced=res.namespaced)
            md = want["metadata"]
            name, ns = md.get("name") or "", md.get("namespace") or ""
            live = self.cached(res, ns, name)
            if live is None:
                try:
                    await self._api.create(want, resource=res)
                except AlreadyExists:
                    live = await self._api.get_or_none(res, name, namespace=ns or None)
                    if live is None:
                        continue
                else:
                    done.append(Restored("created", res.kind, ns, name))
                    continue
            if (live.get("metadata") or {}).get("deletionTimestamp"):
                continue
            if contains(live, want):
                continue
            if await self._patch_if_changed(res, live, want):
                done.append(Restored("patched", res.kind, ns, name))
        return done

    async def _patch_if_changed(
        self, res: ApiResource, live: Mapping[str, Any], want: Mapping[str, Any]
    ) -> bool:
        md = live.get("metadata") or {}
        body = {k: v for k, v in want.items() if k not in ("apiVersion", "kind", "status")}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
        uid_rv = (str(md.get("uid")), str(md.get("resourceVersion")))
        if self._normalised.get(uid_rv) == digest:
            return False  # the server already showed this patch changes nothing
        name, ns = md.get("name") or "", md.get("namespace") or None
        try:
            trial = await self._api.patch(res, name, body, namespace=ns, type=PatchType.MERGE, dry_run=True)
        except NotFound:
            return False
        if _content(trial) == _content(live):
            if len(self._normalised) > 10_000:
                self._normalised.clear()
            self._normalised[uid_rv] = digest
            return False
        await self._api.patch(res, name, body, namespace=ns, type=PatchType.MERGE)
        return True
