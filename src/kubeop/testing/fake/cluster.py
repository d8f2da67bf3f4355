"""FakeCluster: an in-process Kubernetes API for unit tests of reconcilers.

    from kubeop.testing import FakeCluster

    async def test_widget_gets_a_configmap() -> None:
        cluster = FakeCluster()
        cluster.add_crd(Widget)                      # a CustomResource class or a CRD manifest
        quiet = Serving(metrics_address=None, health_address=None)   # kubeop.manager.Serving
        manager = Manager(cluster.client(), clock=cluster.clock, serving=quiet)
        manager.add(Controller.for_(Widget).owns(CONFIGMAPS).reconcile(reconcile))
        stop = asyncio.Event()
        running = asyncio.ensure_future(manager.start(stop))
        api = cluster.client()
        await api.create(widget("w"))
        ...                                          # poll api.get_or_none(CONFIGMAPS, ...)
        cluster.step(3600)                           # an hour later: RequeueAfter timers fire
        stop.set(); await running; await api.close()

(``tests/unit/examples/test_demo_on_fake_cluster.py`` is a complete one.) A runnable runs on a
``kubeop.cluster.Cluster(cluster.client())`` without any manager.

It stands behind the same :class:`~kubeop.client.transport.Transport` seam as the HTTP transport,
so everything above it (``Client``, informers, the reconciler client, leader election, events,
the Manager) runs unchanged. What it does as kube-apiserver does, for built-in kinds and any CRD:

- one global resourceVersion; uid, creationTimestamp; ``metadata.generation`` bumped on spec
  changes only (kinds that keep one); 409 Conflict on a stale resourceVersion, AlreadyExists;
  404 NotFound as a Status; an update that changes nothing writes nothing;
- create, get, list (limit/continue from a snapshot), update, patch (merge, JSON patch,
  strategic merge for built-in kinds, server-side apply with conflicts between appliers),
  delete, deletecollection, dry runs; status and scale subresources (a status write ignores
  everything but status, a main write ignores status);
- finalizers and deletionTimestamp; owner references with garbage collection (background,
  foreground with blockOwnerDeletion, orphan), namespaces that terminate with their contents,
  done at once after each write rather than eventually;
- label selectors, and field selectors on ``metadata.name``, ``metadata.namespace`` and the
  fields the server supports per kind (400 for others);
- watches from a resourceVersion (ordered events; ADDED/DELETED when an object enters or leaves
  a selection), ``sendInitialEvents``, bookmarks on :meth:`FakeCluster.step`, 410 Expired for
  a version older than the last :meth:`FakeCluster.compact`; aggregated and legacy discovery.

Faults, for tests of what code does when a request fails: :meth:`FakeCluster.fail` answers the
next requests of one method to one resource (or object) with an error status instead (nothing is
written), ``times`` times or until :meth:`FakeCluster.heal`.

What it does not do: schema validation, defaulting, pruning, admission webhooks (their
configurations are stored, never called), conversion, RBAC, or any controller but the garbage
collector's and the namespace controller's work (no Deployment creates Pods). Test that against
the real control plane (:class:`ControlPlane`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubeop.client.client import Client
from kubeop.client.config import ClientConfig
from kubeop.core.request import ApiRequest, RequestBuilder
from kubeop.core.resource import ApiResource
from kubeop.queue.clock import Clock, SteppedClock
from kubeop.testing.fake.api import Api, bookmark
from kubeop.testing.fake.kinds import Kind
from kubeop.testing.fake.store import Failure, Store
from kubeop.testing.fake.transport import FakeTransport

__all__ = ["FakeCluster", "SteppableClock"]

SERVER = "https://fake-cluster.invalid"


class SteppableClock(Clock, Protocol):
    """A clock a test moves forward: :class:`~kubeop.queue.SteppedClock` or
    :class:`~kubeop.queue.FakeClock`."""

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward and run the callbacks due by then."""


# The reason kube-apiserver gives with each status code a test may inject.
_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class _Fault:
    method: str
    path: re.Pattern[str]
    code: int
    left: int | None  # None: until healed

    def matches(self, req: ApiRequest) -> bool:
        return req.method == self.method and self.path.fullmatch(req.path) is not None


class FakeCluster:
    """An in-process API server; see the module docstring for what it does.

    ``clock`` is the time the cluster stamps objects with and measures watch timeouts in; give
    the same one to the code under test (``Manager(client, clock=cluster.clock)``) and
    :meth:`step` moves both. By default a :class:`~kubeop.queue.SteppedClock`: the real time
    plus the steps. ``garbage_collection=False`` leaves dependents and the ``orphan`` and
    ``foregroundDeletion`` finalizers alone, as a control plane without kube-controller-manager
    does.
    """

    def __init__(self, *, clock: SteppableClock | None = None, garbage_collection: bool = True) -> None:
        self.clock: SteppableClock = clock if clock is not None else SteppedClock()
        self._store = Store(self.clock.utcnow, garbage_collection=garbage_collection)
        self._api = Api(self._store, self.clock.now)
        self._faults: list[_Fault] = []

    # -- clients --------------------------------------------------------------------------------

    def client(self, *, namespace: str = "default") -> Client:
        """A new :class:`~kubeop.client.Client` talking to this cluster (``namespace`` is its
        default, as a kubeconfig context's). Close it, or let the Manager that owns it do so."""
        return Client(transport=self.transport(namespace=namespace))

    def transport(self, *, namespace: str = "default") -> FakeTransport:
        """The :class:`~kubeop.client.transport.Transport` under :meth:`client`."""
        config = ClientConfig(
            server=SERVER, namespace=namespace, qps=None, source="kubeop.testing.FakeCluster"
        )
        return FakeTransport(self, config)

    # -- faults ---------------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        resource: ApiResource,
        name: str | None = None,
        *,
        namespace: str | None = None,
        code: int = 500,
        times: int | None = 1,
    ) -> None:
        """Answer the next ``times`` requests (every one with ``times=None``, until :meth:`heal`)
        of ``method`` (``"PATCH"``, ``"GET"``...) to ``resource`` with HTTP ``code`` and its
        ``Status`` (the client raises the matching error) and write nothing. ``name`` narrows it
        to one object (and its subresources), ``namespace`` to one namespace (else any, and the
        cluster-wide collection); the earliest matching rule answers first.
        """
        if not isinstance(method, str) or method != method.upper() or not method.isalpha():
            raise ValueError(f"fail(method={method!r}): give an HTTP method such as 'PATCH'")
        if not isinstance(code, int) or not 400 <= code <= 599:
            raise ValueError(f"fail(code={code!r}): give an HTTP error status (400-599)")
        if times is not None and (not isinstance(times, int) or times < 1):
            raise ValueError(f"fail(times={times!r}): give a positive count, or None for every request")
        # The paths the request builder makes, in any namespace when none is given.
        builder = RequestBuilder(resource, namespace or "x")
        path = re.escape(builder.object_path(name) if name is not None else builder.collection_path)
        if resource.namespaced and namespace is None:
            path = path.replace(re.escape("/namespaces/x/"), "(/namespaces/[^/]+)?/", 1)
        self._faults.append(_Fault(method, re.compile(f"{path}(/.*)?"), code, times))

    def heal(self) -> None:
        """Forget every failure :meth:`fail` set up that has not happened yet."""
        self._faults.clear()

    def _fault(self, req: ApiRequest) -> Failure | None:
        """The injected failure that answers ``req``, if any (counted as used)."""
        for fault in self._faults:
            if fault.matches(req):
                if fault.left is not None:
                    fault.left -= 1
                    if fault.left == 0:
                        self._faults.remove(fault)
                reason = _REASONS.get(fault.code, "")
                return Failure(
                    fault.code, reason, f"injected failure of {req.method} {req.path} (FakeCluster.fail)"
                )
        return None

    # -- kinds ----------------------------------------------------------------------------------

    def add_crd(self, *crds: Mapping[str, Any] | type) -> None:
        """Serve custom resources: CRD manifests (dicts) or :class:`kubeop.crd.CustomResource`
        classes. Creating a CustomResourceDefinition through the API works too."""
        kind = self._store.kinds.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        assert kind is not None
        for crd in crds:
            manifest = _manifest(crd)
            name = (manifest.get("metadata") or {}).get("name", "")
            try:
                self._store.create(kind, None, manifest)
            except Failure as e:
                if e.status["reason"] == "AlreadyExists":
                    current = self._store.get(kind, None, name)
                    manifest["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                    self._store.update(kind, None, name, manifest)
                else:
                    raise ValueError(f"add_crd: {e.status['message']}") from None

    @property
    def kinds(self) -> list[Kind]:
        """The kinds served now (built-in and custom), one per group/version/plural."""
        return list(self._store.kinds)

    # -- time and history -----------------------------------------------------------------------

    def step(self, seconds: float) -> None:
        """Move time forward by ``seconds``: the clock (firing what falls due on it), watches
        that asked for ``timeoutSeconds`` (they end, as the server closes them) and a bookmark
        to every watch that allows them."""
        if seconds < 0:
            raise ValueError(f"step(seconds) cannot go backwards, got {seconds}")
        self.clock.advance(seconds)
        now = self.clock.now()
        store = self._store
        for watch in list(store.watches):
            if watch.deadline is not None and watch.deadline <= now:
                store.watches.discard(watch)
                watch.queue.put_nowait(None)
            elif watch.bookmarks:
                watch.queue.put_nowait(("BOOKMARK", bookmark(watch.kind, store.rv)))

    @property
    def resource_version(self) -> str:
        """The latest resourceVersion (of the last write to any object)."""
        return str(self._store.rv)

    def compact(self) -> None:
        """Forget history up to now, as etcd compaction does: a watch or an exact list from an
        older resourceVersion gets 410 Expired (a relist), continue tokens expire. Open watches
        go on; :meth:`end_watches` ends them."""
        self._store.compact()
        self._api._continues.clear()

    def end_watches(self) -> None:
        """End every open watch, as a server restart or a dropped connection does."""
        self._end_watches(owner=None)

    def _end_watches(self, owner: object) -> None:
        for watch in list(self._store.watches):
            if owner is None or watch.owner is owner:
                self._store.watches.discard(watch)
                watch.queue.put_nowait(None)


def _manifest(crd: Mapping[str, Any] | type) -> dict[str, Any]:
    if isinstance(crd, type):
        from kubeop.crd import crd_manifest

        return crd_manifest(crd)
    if not isinstance(crd, Mapping):
        raise TypeError(f"add_crd takes CRD manifests or CustomResource classes, got {type(crd).__name__}")
    if crd.get("kind") not in (None, "CustomResourceDefinition"):
        raise ValueError(
            f"add_crd: expected a CustomResourceDefinition manifest, got kind {crd.get('kind')!r}"
        )
    import orjson

    return orjson.loads(orjson.dumps(dict(crd)))  # type: ignore[no-any-return]
