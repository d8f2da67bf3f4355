"""The fake cluster against kube-apiserver: the same assertions on both, so the fake cannot drift.

Every test takes ``backend``, parametrized as ``fake`` (kubeop.testing.FakeCluster, in process)
and ``real`` (the session's local control plane; full, because garbage collection and namespace
deletion are kube-controller-manager's work). Effects the real cluster has eventually (garbage
collection, namespace termination) are awaited with ``eventually``; the fake has them at once.

The tests of API semantics every kind shares also take ``kind``: ConfigMap (built in) and Gadget
(a custom resource of GADGET_CRD). A third backend, ``aggregated``, is kubeop's own aggregated API
server (kubeop.apiserver.APIServer with MemoryStorage, in process on loopback, no control plane)
serving the Gadget kind; it runs every test taking ``kind`` (on Gadgets) and the Gadget tests
listed in ``_AGGREGATED``. See ``_NOT_AGGREGATED`` for why the others are not.

    pytest tests/e2e/testing/test_fake_conformance.py -k "not real"   # seconds, no control plane
    flock /tmp/kubeop-bench.lock pytest tests/e2e/testing/test_fake_conformance.py
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubeop.apiserver import APIServer, MemoryStorage
from kubeop.apiserver.auth import RequestHeaderConfig
from kubeop.client import Client, ClientConfig, load_kubeconfig
from kubeop.client.watch import WatchEvent
from kubeop.core import ApiResource
from kubeop.core.errors import AlreadyExists, ApiError, BadRequest, Conflict, Gone, Invalid, NotFound
from kubeop.core.patch import PatchType
from kubeop.crd import CustomResource
from kubeop.crd.resource import CamelModel
from kubeop.testing import FakeCluster
from kubeop.testing.pki import CertificateAuthority

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
NS = ApiResource("", "v1", "namespaces", kind="Namespace", namespaced=False)
DEPLOY = ApiResource("apps", "v1", "deployments", kind="Deployment")
VALIDATING = ApiResource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    kind="ValidatingWebhookConfiguration",
    namespaced=False,
)
GADGETS = ApiResource(
    "conformance.kubeop.dev", "v1", "gadgets", kind="Gadget", subresources=("status", "scale")
)

GADGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.conformance.kubeop.dev"},
    "spec": {
        "group": "conformance.kubeop.dev",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
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
                                "properties": {"size": {"type": "integer"}, "replicas": {"type": "integer"}},
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


class GadgetSpec(CamelModel):
    size: int | None = None
    replicas: int | None = None


class GadgetStatus(CamelModel):
    phase: str | None = None
    replicas: int | None = None


class Gadget(CustomResource, group="conformance.kubeop.dev", version="v1", subresources=["status"]):
    """GADGET_CRD's kind as a kubeop model, for the aggregated backend (no scale subresource)."""

    spec: GadgetSpec
    status: GadgetStatus | None = None


@dataclass(frozen=True)
class Kind:
    """A kind the shared semantics are pinned on: ConfigMap (``builtin``: its values in ``data``,
    as strings; no generation) or Gadget (in ``spec``, integers). Both take the values ``size``
    and ``replicas`` (the fields of Gadget's schema)."""

    name: str
    resource: ApiResource
    holder: str
    builtin: bool

    def value(self, number: int) -> int | str:
        return str(number) if self.builtin else number

    def values(self, **numbers: int) -> dict[str, Any]:
        return {key: self.value(number) for key, number in numbers.items()}

    def make(self, name: str = "", *, generate_name: str | None = None, **numbers: int) -> dict[str, Any]:
        meta = {"name": name} if generate_name is None else {"generateName": generate_name}
        return {
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": meta,
            self.holder: self.values(**numbers),
        }

    @property
    def qualified(self) -> str:
        """The resource as kube-apiserver's messages name it (``configmaps``, ``gadgets.<group>``)."""
        return ".".join(part for part in (self.resource.plural, self.resource.group) if part)


CONFIGMAP = Kind("configmap", CM, "data", builtin=True)
GADGET = Kind("gadget", GADGETS, "spec", builtin=False)

# The Gadget tests (not taking ``kind``) the aggregated backend runs too: those whose semantics an
# aggregated API server of ours owns, with no built-in kind or kube-controller-manager involved.
_AGGREGATED = frozenset(
    {
        "test_generation_and_the_status_subresource",
        "test_deletion_marks_once_and_stale_status_writes_conflict",
    }
)
# Why the other tests without ``kind`` are not generated for it: they are about Deployments,
# Namespaces or webhook configurations (kube-apiserver's built-in kinds, in another group than the
# one an aggregated server owns), garbage collection and namespace termination
# (kube-controller-manager), or the scale subresource (APIServer serves status only).
_NOT_AGGREGATED = {
    "test_the_scale_subresource": "the scale subresource (APIServer serves status only)",
    "test_strategic_merge_patch": "Deployments (strategic merge of a built-in kind)",
    "test_webhook_configurations_replace_on_merge_and_merge_by_name_on_strategic": "built-in kind",
    "test_background_deletion_collects_dependents": "garbage collection (kube-controller-manager)",
    "test_foreground_deletion_waits_for_blocking_dependents": "garbage collection (kube-controller-manager)",
    "test_orphan_deletion_keeps_dependents": "garbage collection (kube-controller-manager)",
    "test_a_deleted_namespace_takes_its_contents": "namespaces (built-in, kube-controller-manager)",
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" not in metafunc.fixturenames:
        return
    if "kind" in metafunc.fixturenames:
        cases = [(b, k) for b in ("fake", "real") for k in (CONFIGMAP, GADGET)] + [("aggregated", GADGET)]
        ids = [f"{b}-{k.name}" for b, k in cases]
        metafunc.parametrize(("backend", "kind"), cases, indirect=["backend"], ids=ids)
        return
    extra = ["aggregated"] if metafunc.function.__name__ in _AGGREGATED else []
    metafunc.parametrize("backend", ["fake", "real", *extra], indirect=True)


async def _allow_all(body: dict[str, Any]) -> Mapping[str, Any]:
    """TokenReview and SubjectAccessReview for the aggregated backend: anyone, anything."""
    if body["kind"] == "TokenReview":
        return {**body, "status": {"authenticated": True, "user": {"username": "conformance"}}}
    return {**body, "status": {"allowed": True}}


@asynccontextmanager
async def _aggregated(directory: Path) -> AsyncIterator[Backend]:
    serving = CertificateAuthority.create("serving-ca")
    serving.save(directory, "serving-ca")
    serving.issue_to(directory / "certs", "tls", "api", hosts=["127.0.0.1"], server=True)
    proxy_ca = CertificateAuthority.create("front-proxy-ca")
    storage = MemoryStorage()
    server = APIServer(
        [Gadget],
        storage,
        address="127.0.0.1:0",
        cert_dir=directory / "certs",
        requestheader=RequestHeaderConfig(proxy_ca.cert_pem.decode(), ("front-proxy-client",)),
        review=_allow_all,
        bookmark_interval=0.2,
    )
    await server.start()
    try:
        config = ClientConfig(
            server=f"https://127.0.0.1:{server.port}",
            ca_file=str(directory / "serving-ca.crt"),
            token="conformance",
            namespace="conformance",
            qps=None,
        )
        async with Client(config) as client:
            yield Backend("aggregated", client, "conformance", storage.compact)
    finally:
        await server.stop()


@dataclass
class Backend:
    name: str
    client: Client
    namespace: str
    compact: Callable[[], None]


@pytest.fixture(scope="session")
def _gadget_crd(control_plane: Any) -> None:
    control_plane.install_crds([GADGET_CRD])


@pytest.fixture
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "aggregated":
        async with _aggregated(tmp_path) as aggregated:
            yield aggregated
        return
    if request.param == "fake":
        cluster = FakeCluster()
        cluster.add_crd(GADGET_CRD)
        async with cluster.client(namespace="conformance") as client:
            await client.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "conformance"}}
            )
            yield Backend("fake", client, "conformance", cluster.compact)
        return
    request.getfixturevalue("_gadget_crd")
    namespace = request.getfixturevalue("namespace")
    plane = request.getfixturevalue("control_plane")

    def compact() -> None:
        # etcd forgets; the API server's watch cache keeps the history until it restarts.
        plane.compact_etcd()
        plane.stop_apiserver()
        plane.start_apiserver()

    async with Client(load_kubeconfig(plane.kubeconfig_path, namespace=namespace, qps=None)) as client:
        yield Backend("real", client, namespace, compact)


async def eventually(check: Callable[[], Awaitable[Any]], *, within: float = 60.0) -> Any:
    deadline = time.monotonic() + within
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {within} s")
        await asyncio.sleep(0.05)


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def gadget(name: str, size: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "conformance.kubeop.dev/v1",
        "kind": "Gadget",
        "metadata": {"name": name},
        "spec": {"size": size, **spec},
    }


def owned_by(owner: dict[str, Any], *, block: bool = False) -> list[dict[str, Any]]:
    ref = {
        "apiVersion": "v1",
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return [ref]


# -- objects, versions, conflicts ------------------------------------------------------------------


async def test_conflicts_already_exists_and_not_found(backend: Backend, kind: Kind) -> None:
    api = backend.client
    created = await api.create(kind.make("a", size=1))
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and int(meta["resourceVersion"]) > 0
    if kind.builtin:
        assert "generation" not in meta  # ConfigMaps keep none
    else:
        assert meta["generation"] == 1
    stale = copy.deepcopy(created)
    created[kind.holder] = kind.values(size=2)
    updated = await api.update(created)
    assert int(updated["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    stale[kind.holder] = kind.values(size=3)
    with pytest.raises(Conflict) as conflict:
        await api.update(stale)
    assert conflict.value.code == 409 and conflict.value.reason == "Conflict"
    assert "the object has been modified" in str(conflict.value)
    with pytest.raises(AlreadyExists) as exists:
        await api.create(kind.make("a", size=1))
    assert exists.value.code == 409 and exists.value.reason == "AlreadyExists"
    with pytest.raises(NotFound) as missing:
        await api.get(kind.resource, "nope")
    assert missing.value.code == 404 and f'{kind.qualified} "nope" not found' in str(missing.value)
    with pytest.raises(NotFound):
        await api.delete(kind.resource, "nope")
    # An update that changes nothing writes nothing: same resourceVersion.
    again = await api.update(updated)
    assert again["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]


async def test_generation_and_the_status_subresource(backend: Backend) -> None:
    api = backend.client
    created = await api.create({**gadget("g"), "status": {"phase": "ignored on create"}})
    assert created["metadata"]["generation"] == 1 and "status" not in created
    created["spec"]["size"] = 2
    spec_changed = await api.update(created)
    assert spec_changed["metadata"]["generation"] == 2
    spec_changed["metadata"]["labels"] = {"x": "y"}
    labelled = await api.update(spec_changed)
    assert labelled["metadata"]["generation"] == 2  # metadata is not spec
    # A status write ignores spec; a main write ignores status.
    labelled["status"] = {"phase": "Ready"}
    labelled["spec"]["size"] = 99
    with_status = await api.update_status(labelled)
    assert with_status["status"] == {"phase": "Ready"} and with_status["spec"]["size"] == 2
    assert with_status["metadata"]["generation"] == 2
    with_status["status"] = {"phase": "Broken"}
    main = await api.update(with_status)
    assert main["status"] == {"phase": "Ready"}
    patched = await api.patch(GADGETS, "g", {"status": {"phase": "Patched"}}, subresource="status")
    assert patched["status"]["phase"] == "Patched" and patched["metadata"]["generation"] == 2
    # A custom resource needs a resourceVersion to be replaced.
    blind = copy.deepcopy(patched)
    del blind["metadata"]["resourceVersion"]
    with pytest.raises(Invalid) as invalid:
        await api.update(blind)
    assert invalid.value.code == 422 and "metadata.resourceVersion" in str(invalid.value)


async def test_the_scale_subresource(backend: Backend) -> None:
    api = backend.client
    await api.create(gadget("s", replicas=1))
    scale = await api.get_scale(GADGETS, "s")
    assert (scale["kind"], scale["apiVersion"], scale["spec"]["replicas"]) == ("Scale", "autoscaling/v1", 1)
    await api.scale(GADGETS, "s", 3)
    after = await api.get(GADGETS, "s")
    assert after["spec"]["replicas"] == 3 and after["metadata"]["generation"] == 2


async def test_finalizers_and_deletion_timestamp(backend: Backend, kind: Kind) -> None:
    api = backend.client
    obj = kind.make("f", size=1)
    obj["metadata"]["finalizers"] = ["conformance.kubeop.dev/hold"]
    await api.create(obj)
    await api.delete(kind.resource, "f")
    held = await api.get(kind.resource, "f")
    assert held["metadata"]["deletionTimestamp"]
    held["metadata"]["finalizers"].append("conformance.kubeop.dev/another")
    with pytest.raises(Invalid, match="no new finalizers"):
        await api.update(held)
    ops = [
        {"op": "test", "path": "/metadata/finalizers", "value": ["conformance.kubeop.dev/hold"]},
        {"op": "replace", "path": "/metadata/finalizers", "value": []},
    ]
    await api.patch(kind.resource, "f", ops, type=PatchType.JSON)
    with pytest.raises(NotFound):
        await api.get(kind.resource, "f")


async def test_deletion_marks_once_and_stale_status_writes_conflict(backend: Backend) -> None:
    api = backend.client
    obj = gadget("del")
    obj["metadata"]["finalizers"] = ["conformance.kubeop.dev/hold"]
    created = await api.create(obj)
    await api.update_status({**created, "status": {"phase": "One"}})
    with pytest.raises(Conflict):  # the status subresource checks the resourceVersion too
        await api.update_status({**created, "status": {"phase": "Two"}})
    await api.delete(GADGETS, "del")
    marked = await api.get(GADGETS, "del")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    assert marked["metadata"]["generation"] == created["metadata"]["generation"] + 1  # marking is a change
    await api.delete(GADGETS, "del")  # a second delete changes nothing
    again = await api.get(GADGETS, "del")
    assert again["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
    assert again["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
    again["metadata"]["finalizers"] = []
    await api.update(again)  # removing the last finalizer deletes it
    assert await api.get_or_none(GADGETS, "del") is None


async def test_patch_formats(backend: Backend, kind: Kind) -> None:
    api = backend.client
    await api.create(kind.make("p", size=1, replicas=2))
    merged = await api.patch(kind.resource, "p", {kind.holder: {"replicas": None, "size": kind.value(3)}})
    assert merged[kind.holder] == kind.values(size=3)  # null removes a key, a value replaces one
    if not kind.builtin:
        assert merged["metadata"]["generation"] == 2
    added = await api.patch(kind.resource, "p", {kind.holder: {"replicas": kind.value(2)}})
    assert added[kind.holder] == kind.values(size=3, replicas=2)  # the keys not in the patch stay
    test = [{"op": "test", "path": f"/{kind.holder}/size", "value": kind.value(9)}]
    with pytest.raises(ApiError) as failed:
        await api.patch(kind.resource, "p", test, type=PatchType.JSON)
    assert failed.value.code == 422
    ops = [{"op": "replace", "path": f"/{kind.holder}/size", "value": kind.value(4)}]
    assert (await api.patch(kind.resource, "p", ops, type=PatchType.JSON))[kind.holder]["size"] == kind.value(
        4
    )
    if not kind.builtin:  # strategic merge is for built-in kinds (test_strategic_merge_patch)
        with pytest.raises(ApiError) as unsupported:
            await api.patch(kind.resource, "p", {"spec": {"size": 1}}, type=PatchType.STRATEGIC)
        assert unsupported.value.code == 415


async def test_strategic_merge_patch(backend: Backend) -> None:
    api = backend.client
    with pytest.raises(ApiError) as unsupported:
        await api.patch(GADGETS, "p", {"spec": {"size": 1}}, type=PatchType.STRATEGIC)
    assert unsupported.value.code in (404, 415)  # 415 for a CR that exists; the server checks the type first
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]},
            },
        },
    }
    await api.create(deployment)
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}}}
    out = await api.patch(DEPLOY, "d", patch, type=PatchType.STRATEGIC)
    images = [(c["name"], c["image"]) for c in out["spec"]["template"]["spec"]["containers"]]
    assert images == [("a", "a:1"), ("b", "b:2")]  # merged by name, not replaced
    assert out["metadata"]["generation"] == 2


async def test_webhook_configurations_replace_on_merge_and_merge_by_name_on_strategic(
    backend: Backend,
) -> None:
    api = backend.client
    name = f"conformance-{uuid.uuid4().hex[:8]}.kubeop.dev"  # cluster-scoped: one per run

    def hook(hook_name: str, path: str) -> dict[str, Any]:
        return {
            "name": f"{hook_name}.{name}",
            "clientConfig": {"url": f"https://127.0.0.1:1/{path}"},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }

    def urls(obj: dict[str, Any]) -> list[tuple[str, str]]:
        return [(w["name"].split(".")[0], w["clientConfig"]["url"][-2:]) for w in obj.get("webhooks") or []]

    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [hook("a", "a1")],
    }
    await api.create(body, resource=VALIDATING)
    try:
        merged = await api.patch(VALIDATING, name, {"webhooks": [hook("b", "b1"), hook("c", "c1")]})
        assert urls(merged) == [("b", "b1"), ("c", "c1")]  # a merge patch replaces the list
        patch = {"webhooks": [{"name": f"b.{name}", "clientConfig": {"url": "https://127.0.0.1:1/b2"}}]}
        out = await api.patch(VALIDATING, name, patch, type=PatchType.STRATEGIC)
        assert urls(out) == [("b", "b2"), ("c", "c1")]  # merged by name
        emptied = await api.patch(VALIDATING, name, {"webhooks": []})
        assert not emptied.get("webhooks")
    finally:
        await api.delete(VALIDATING, name)


async def test_server_side_apply_conflicts(backend: Backend, kind: Kind) -> None:
    api = backend.client
    created = await api.apply(kind.make("ssa", size=1, replicas=2), field_manager="alice")
    assert created[kind.holder] == kind.values(size=1, replicas=2)
    alone = await api.apply(kind.make("ssa", size=1), field_manager="alice")
    assert alone[kind.holder] == kind.values(size=1)
    with pytest.raises(Conflict, match='conflict with "alice"'):
        await api.apply(kind.make("ssa", size=5), field_manager="bob")
    forced = await api.apply(kind.make("ssa", size=5), field_manager="bob", force=True)
    assert forced[kind.holder] == kind.values(size=5)


async def test_generate_name_dry_run_and_delete_collection(backend: Backend, kind: Kind) -> None:
    api = backend.client
    generated = await api.create(kind.make(generate_name="gen-", size=1))
    name = generated["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5
    dry = await api.create(kind.make("dry", size=7), dry_run=True)
    assert dry[kind.holder] == kind.values(size=7) and await api.get_or_none(kind.resource, "dry") is None
    await api.patch(kind.resource, name, {kind.holder: kind.values(size=9)}, dry_run=True)
    assert (await api.get(kind.resource, name))[kind.holder] == kind.values(size=1)
    for i in range(3):
        obj = kind.make(f"dc-{i}", size=1)
        obj["metadata"]["labels"] = {"batch": "yes" if i < 2 else "no"}
        await api.create(obj)
    await api.delete_collection(kind.resource, label_selector="batch=yes")
    left = await api.list(kind.resource, label_selector="batch")
    assert [o["metadata"]["name"] for o in left] == ["dc-2"]


async def test_names_are_validated(backend: Backend, kind: Kind) -> None:
    api = backend.client
    for bad in ("Bad_Name", "-lead", "x" * 254):
        with pytest.raises(Invalid) as refused:
            await api.create(kind.make(bad, size=1))
        assert refused.value.code == 422 and "metadata.name: Invalid value" in str(refused.value)
    assert "RFC 1123 subdomain" in str(refused.value) or "253" in str(refused.value)
    if kind.builtin:
        with pytest.raises(Invalid, match=r"metadata\.name: Invalid value"):
            await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad"}})
    with pytest.raises(Invalid, match=r"metadata\.generateName"):
        await api.create(kind.make(generate_name="Bad_", size=1))
    assert (await api.create(kind.make("a.b-c", size=1)))["metadata"]["name"] == "a.b-c"
    long = await api.create(kind.make(generate_name="g" * 70, size=1))
    name = long["metadata"]["name"]
    assert len(name) == 63 and name.startswith("g" * 58)  # the prefix is cut to fit 63
    with pytest.raises(BadRequest) as selector:
        await api.list(kind.resource, label_selector="tier in (a")
    assert selector.value.code == 400


# -- lists, selectors, watches -------------------------------------------------------------------


async def test_label_and_field_selectors(backend: Backend, kind: Kind) -> None:
    api = backend.client
    for name, tier in (("s1", "web"), ("s2", "db"), ("s3", "web")):
        obj = kind.make(name, size=1)
        obj["metadata"]["labels"] = {"tier": tier}
        await api.create(obj)
    web = await api.list(kind.resource, label_selector="tier=web")
    assert [o["metadata"]["name"] for o in web] == ["s1", "s3"]
    assert all(o["kind"] == kind.resource.kind for o in web)
    not_web = await api.list(kind.resource, label_selector="tier,tier!=web")
    assert [o["metadata"]["name"] for o in not_web] == ["s2"]
    by_name = await api.list(kind.resource, field_selector={"metadata.name": "s3"})
    assert [o["metadata"]["name"] for o in by_name] == ["s3"]
    by_namespace = await api.list(
        kind.resource,
        all_namespaces=True,
        field_selector=f"metadata.namespace={backend.namespace}",
        label_selector="tier",
    )
    assert len(by_namespace) == 3
    with pytest.raises(BadRequest) as unknown:
        await api.list(kind.resource, field_selector=f"{kind.holder}.size=1")
    if kind.builtin:  # (a custom resource's server words it its own way)
        assert "is not a known field selector" in str(unknown.value)
    page = await api.list(kind.resource, label_selector="tier", limit=2)
    assert len(page) == 2 and page.continue_
    rest = await api.list(kind.resource, label_selector="tier", limit=2, continue_=page.continue_)
    assert [o["metadata"]["name"] for o in rest] == ["s3"] and not rest.continue_


async def test_a_list_at_an_exact_resource_version_is_that_snapshot(backend: Backend, kind: Kind) -> None:
    api = backend.client
    first = await api.create(kind.make("ex-a", size=1))
    then = first["metadata"]["resourceVersion"]
    first[kind.holder] = kind.values(size=2)
    await api.update(first)
    await api.create(kind.make("ex-b", size=1))
    old = await api.list(
        kind.resource, resource_version=then, resource_version_match="Exact", label_selector="!x"
    )
    assert old.resource_version == then
    assert [
        (o["metadata"]["name"], o[kind.holder]["size"])
        for o in old
        if o["metadata"]["name"].startswith("ex-")
    ] == [("ex-a", kind.value(1))]
    await api.delete(kind.resource, "ex-a")
    after = (await api.list(kind.resource)).resource_version
    await api.create(kind.make("ex-a", size=3))
    gone = await api.list(kind.resource, resource_version=after, resource_version_match="Exact")
    assert [o["metadata"]["name"] for o in gone if o["metadata"]["name"].startswith("ex-")] == ["ex-b"]


async def _take(events: AsyncIterator[WatchEvent[Any]], count: int) -> list[tuple[str, str, str]]:
    out = []
    async with asyncio.timeout(30):
        async for event in events:
            if event.type == "BOOKMARK":
                continue
            meta = event.object["metadata"]
            out.append((event.type, meta["name"], meta["resourceVersion"]))
            if len(out) == count:
                break
    return out


async def test_watch_order_and_selection(backend: Backend, kind: Kind) -> None:
    api = backend.client
    start = (await api.list(kind.resource)).resource_version
    # (kube-controller-manager adds kube-root-ca.crt to every namespace: select ours by label.)
    everything = api.watch(kind.resource, resource_version=start, label_selector="tier")
    web = api.watch(kind.resource, resource_version=start, label_selector="tier=web")
    obj = kind.make("w", size=1)
    obj["metadata"]["labels"] = {"tier": "web"}
    created = await api.create(obj)
    created[kind.holder] = kind.values(size=2)
    updated = await api.update(created)
    moved = await api.patch(kind.resource, "w", {"metadata": {"labels": {"tier": "db"}}})
    await api.delete(kind.resource, "w")
    seen = await _take(everything, 4)
    assert [(t, n) for t, n, _ in seen] == [
        ("ADDED", "w"),
        ("MODIFIED", "w"),
        ("MODIFIED", "w"),
        ("DELETED", "w"),
    ]
    versions = [int(rv) for _, _, rv in seen]
    assert versions == sorted(versions) and len(set(versions)) == 4
    assert seen[1][2] == updated["metadata"]["resourceVersion"]
    # Leaving a label selection is a DELETED for that watch (with the object as it is now).
    selected = await _take(web, 3)
    assert [(t, rv) for t, _, rv in selected] == [
        ("ADDED", created["metadata"]["resourceVersion"]),
        ("MODIFIED", updated["metadata"]["resourceVersion"]),
        ("DELETED", moved["metadata"]["resourceVersion"]),
    ]
    await everything.aclose()
    await web.aclose()


async def test_watch_from_a_compacted_version_is_gone(backend: Backend, kind: Kind) -> None:
    api = backend.client
    await api.create(kind.make("old", size=1))
    old = (await api.list(kind.resource)).resource_version
    await api.create(kind.make("newer", size=1))
    await asyncio.to_thread(backend.compact)
    events = api.watch(kind.resource, resource_version=old)
    with pytest.raises(Gone) as gone:
        await _take(events, 1)
    assert gone.value.code == 410 and "too old resource version" in str(gone.value)
    with pytest.raises(Gone):
        await api.list(kind.resource, resource_version=old, resource_version_match="Exact")


async def test_initial_events_end_with_a_bookmark(backend: Backend, kind: Kind) -> None:
    api = backend.client
    await api.create(kind.make("i1", size=1))
    await api.create(kind.make("i2", size=1))
    names: list[str] = []
    async with asyncio.timeout(30):
        async for event in api.watch(kind.resource, send_initial_events=True):
            if event.is_initial_events_end:
                break
            names.append(event.object["metadata"]["name"])
    assert sorted(n for n in names if n != "kube-root-ca.crt") == ["i1", "i2"]


# -- garbage collection, namespaces ---------------------------------------------------------------


async def test_background_deletion_collects_dependents(backend: Backend) -> None:
    api = backend.client
    owner = await api.create(cm("owner"))
    child = cm("child")
    child["metadata"]["ownerReferences"] = owned_by(owner)
    await api.create(child)
    await api.delete(CM, "owner")
    assert await eventually(lambda: _gone(api, "child"))


async def test_foreground_deletion_waits_for_blocking_dependents(backend: Backend) -> None:
    api = backend.client
    owner = await api.create(cm("fg-owner"))
    child = cm("fg-child")
    child["metadata"]["ownerReferences"] = owned_by(owner, block=True)
    child["metadata"]["finalizers"] = ["conformance.kubeop.dev/hold"]
    await api.create(child)
    await api.delete(CM, "fg-owner", propagation_policy="Foreground")
    waiting = await api.get(CM, "fg-owner")
    assert (
        waiting["metadata"]["deletionTimestamp"] and "foregroundDeletion" in waiting["metadata"]["finalizers"]
    )

    async def child_marked() -> bool:
        return bool((await api.get(CM, "fg-child"))["metadata"].get("deletionTimestamp"))

    await eventually(child_marked)
    assert await api.get_or_none(CM, "fg-owner") is not None  # held by the blocking dependent
    await api.patch(CM, "fg-child", {"metadata": {"finalizers": None}})
    assert await eventually(lambda: _gone(api, "fg-owner"))


async def test_orphan_deletion_keeps_dependents(backend: Backend) -> None:
    api = backend.client
    owner = await api.create(cm("or-owner"))
    child = cm("or-child")
    child["metadata"]["ownerReferences"] = owned_by(owner)
    await api.create(child)
    await api.delete(CM, "or-owner", propagation_policy="Orphan")
    assert await eventually(lambda: _gone(api, "or-owner"))
    orphan = await api.get(CM, "or-child")
    assert not orphan["metadata"].get("ownerReferences")


async def test_a_deleted_namespace_takes_its_contents(backend: Backend) -> None:
    api = backend.client
    name = f"{backend.namespace}-x"[:63]
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    await api.create(cm("inside"), namespace=name)
    await api.delete(NS, name)
    terminating = await api.get_or_none(NS, name)
    assert terminating is None or terminating["status"]["phase"] == "Terminating"
    with pytest.raises(ApiError) as refused:
        await api.create(cm("late"), namespace=name)
    assert refused.value.code in (403, 404)

    async def namespace_gone() -> bool:
        return await api.get_or_none(NS, name) is None

    assert await eventually(namespace_gone, within=120)
    with pytest.raises(NotFound):
        await api.get(CM, "inside", namespace=name)


async def _gone(api: Client, name: str) -> bool:
    return await api.get_or_none(CM, name) is None
