"""FakeCluster's own behaviour: time, history, CRDs, informers and leader election on top of it.

The semantics it shares with kube-apiserver are pinned against the real server by
tests/e2e/testing/test_fake_conformance.py; this file covers what only the fake has (stepping
time, compacting on demand, ending watches) and the runtime pieces running on it unchanged.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import pytest
from examples.demo.crd import Demo

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client
from kubeop.client.transport import Transport
from kubeop.core import ApiResource
from kubeop.core.errors import (
    BadRequest,
    Forbidden,
    Gone,
    InternalError,
    NotFound,
    ServiceUnavailable,
    UnsupportedMediaType,
)
from kubeop.core.patch import PatchType
from kubeop.manager import Manager, Serving
from kubeop.queue import FakeClock
from kubeop.testing import FakeCluster
from kubeop.testing.fake import FakeTransport

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
LEASES = ApiResource("coordination.k8s.io", "v1", "leases", kind="Lease")
START = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Let the event loop run until ``condition()`` (the fake answers at once; the loop may be busy)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {within} s")
        await asyncio.sleep(0.001)


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def test_the_fake_transport_is_a_transport() -> None:
    transport: Transport = FakeCluster().transport()
    assert isinstance(transport, FakeTransport) and transport.config.namespace == "default"


async def test_timestamps_follow_the_stepped_clock() -> None:
    clock = FakeClock(wall=START)
    cluster = FakeCluster(clock=clock)
    async with cluster.client() as api:
        first = await api.create(cm("a"))
        cluster.step(90)
        second = await api.create(cm("b"))
    assert first["metadata"]["creationTimestamp"] == "2030-01-02T03:04:05Z"
    assert second["metadata"]["creationTimestamp"] == "2030-01-02T03:05:35Z"
    assert clock.now() == 90
    with pytest.raises(ValueError, match="backwards"):
        cluster.step(-1)


async def test_step_sends_bookmarks_and_ends_watches_past_their_timeout() -> None:
    cluster = FakeCluster(clock=FakeClock())
    async with cluster.client() as api:
        rv = (await api.list(CM)).resource_version
        events = api.watch(CM, resource_version=rv, timeout_seconds=60)
        await api.create(cm("a"))
        assert (await anext(events)).type == "ADDED"  # the watch is open from here on
        cluster.step(30)
        bookmark = await anext(events)
        assert bookmark.type == "BOOKMARK" and bookmark.resource_version == cluster.resource_version
        cluster.step(30)
        assert [e async for e in events] == []  # the server closed it at timeoutSeconds


async def test_compaction_makes_old_versions_gone_and_informers_relist() -> None:
    cluster = FakeCluster()
    async with cluster.client() as api, SharedInformerFactory(api) as factory:
        await api.create(cm("before"))
        informer = factory.informer(CM, namespace="default")
        assert await factory.wait_for_cache_sync(timeout=5)
        old = cluster.resource_version
        await api.create(cm("during"))
        cluster.compact()
        with pytest.raises(Gone):
            await anext(api.watch(CM, resource_version=old))
        cluster.end_watches()  # the informer's watch drops; resuming from its version works
        await api.create(cm("after"))
        await until(lambda: len(informer.store.list()) == 3)
        assert sorted(o["metadata"]["name"] for o in informer.store.list()) == ["after", "before", "during"]


async def test_crds_from_classes_manifests_and_the_api() -> None:
    cluster = FakeCluster()
    cluster.add_crd(Demo)
    assert any(k.kind == "Demo" and k.status for k in cluster.kinds)
    with pytest.raises(ValueError, match=r"spec\.group"):
        cluster.add_crd(
            {"kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "spec": {"names": {}}}
        )
    with pytest.raises(TypeError, match="CRD manifests or CustomResource classes"):
        cluster.add_crd(42)  # type: ignore[arg-type]
    async with cluster.client() as api:
        demo = await api.create({"apiVersion": "yuerblog.cc/v1", "kind": "Demo", "metadata": {"name": "d"}})
        assert demo["metadata"]["generation"] == 1
        with pytest.raises(UnsupportedMediaType):
            await api.patch("demos.yuerblog.cc", "d", {"spec": {}}, type=PatchType.STRATEGIC)
        await api.delete("customresourcedefinitions", "demos.yuerblog.cc")
        assert not any(k.kind == "Demo" for k in cluster.kinds)
        with pytest.raises(NotFound):
            await api.request(
                __import__("kubeop.core.request", fromlist=["RequestBuilder"])
                .RequestBuilder(Demo.resource, "default")
                .get("d")
            )


async def test_writes_the_server_refuses() -> None:
    cluster = FakeCluster()
    async with cluster.client() as api:
        with pytest.raises(NotFound, match='namespaces "nowhere" not found'):
            await api.create(cm("a"), namespace="nowhere")
        with pytest.raises(BadRequest, match="does not match the expected kind"):
            await api.create({**cm("a"), "kind": "Secret"}, resource=CM)
        generated = await api.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "x-"}}
        )
        assert generated["metadata"]["name"].startswith("x-") and len(generated["metadata"]["name"]) == 7
        dry = await api.create(cm("dry"), dry_run=True)
        assert dry["metadata"]["name"] == "dry" and await api.get_or_none(CM, "dry") is None
    with pytest.raises(RuntimeError, match="closed"):
        await api.get(CM, "a")


async def test_injected_failures_answer_matching_requests_and_write_nothing() -> None:
    cluster = FakeCluster()
    async with cluster.client() as api:
        await api.create(cm("a", v="1"))
        await api.create(cm("b", v="1"))
        cluster.fail("PATCH", CM, "a", namespace="default", times=2)
        cluster.fail("PATCH", CM, "b", namespace="default", code=503)
        for _ in range(2):
            with pytest.raises(InternalError, match=r"injected failure of PATCH .*/configmaps/a"):
                await api.patch(CM, "a", {"data": {"v": "2"}})
        assert (await api.get(CM, "a"))["data"] == {"v": "1"}  # nothing written
        await api.patch(CM, "a", {"data": {"v": "2"}})  # the third goes through
        assert (await api.get(CM, "a"))["data"] == {"v": "2"}
        with pytest.raises(ServiceUnavailable):
            await api.patch(CM, "b", {"data": {"v": "2"}})
        await api.patch(CM, "b", {"data": {"v": "2"}})

        cluster.fail("GET", CM, code=403, times=None)  # the collection and every object in it
        for _ in range(3):
            with pytest.raises(Forbidden):
                await api.get(CM, "a", namespace="default")
        with pytest.raises(Forbidden):
            await api.list(CM)  # no namespace: the cluster-wide list
        cluster.heal()
        assert (await api.get(CM, "a"))["data"] == {"v": "2"}

        cluster.fail("GET", CM, namespace="default")
        with pytest.raises(InternalError):
            await api.list(CM, namespace="default")
        assert len(await api.list(CM, namespace="default")) == 2
    with pytest.raises(ValueError, match=r"fail\(code=200\)"):
        cluster.fail("GET", CM, code=200)
    with pytest.raises(ValueError, match=r"fail\(times=0\)"):
        cluster.fail("GET", CM, times=0)
    with pytest.raises(ValueError, match=r"fail\(method='get'\)"):
        cluster.fail("get", CM)


async def test_strategic_merge_directives() -> None:
    cluster = FakeCluster()
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a", "image": "a"}, {"name": "b", "image": "b"}]},
    }
    async with cluster.client() as api:
        await api.create(pod)
        out = await api.patch(
            "pods",
            "p",
            {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}},
            type=PatchType.STRATEGIC,
        )
        assert [c["name"] for c in out["spec"]["containers"]] == ["b"]


async def test_a_services_ports_merge_by_port_and_a_containers_by_container_port() -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]},
    }
    async with FakeCluster().client() as api:
        await api.create(service)
        patch = {"spec": {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 80, "name": "http"}]}}
        out = await api.patch("services", "s", patch, type=PatchType.STRATEGIC)
        assert out["spec"]["ports"] == [
            {"name": "https", "port": 443, "targetPort": 8443, "protocol": "TCP"},
            {"port": 80, "name": "http"},
        ]


async def test_a_manager_wins_the_lease_and_releases_it() -> None:
    cluster = FakeCluster()
    manager = Manager(
        cluster.client(),
        leader_election=True,
        name="lease-test",
        serving=Serving(metrics_address=None, health_address=None),
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    async with cluster.client() as api:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            lease = await api.get_or_none(LEASES, "lease-test-leader", namespace="default")
            if lease and lease["spec"].get("holderIdentity"):
                break
            await asyncio.sleep(0.001)
        assert lease is not None and manager.elector is not None
        assert lease["spec"]["holderIdentity"] == manager.elector.identity
        stop.set()
        await task
        released = await api.get(LEASES, "lease-test-leader", namespace="default")
        assert not released["spec"].get("holderIdentity")


async def test_clients_share_the_cluster() -> None:
    cluster = FakeCluster()
    one, other = cluster.client(namespace="kube-system"), cluster.client()
    await one.create(cm("shared"))
    assert (await other.get(CM, "shared", namespace="kube-system"))["metadata"]["namespace"] == "kube-system"
    assert isinstance(one, Client)
    await one.close()
    await other.close()


async def test_metadata_only_lists_and_watches() -> None:
    """What ListWatch asks for with metadata_only=True: PartialObjectMetadata, given its kind again."""
    from kubeop.cache.listwatch import ListWatch

    cluster = FakeCluster()
    async with cluster.client() as api:
        await api.create(cm("m", big="x" * 100))
        source = ListWatch(api, CM, namespace="default", metadata_only=True)
        page = await source.list(limit=None, continue_=None, resource_version=None)
        assert [(o["kind"], o["metadata"]["name"]) for o in page] == [("ConfigMap", "m")]
        assert "data" not in page.items[0]
        events = await source.watch(resource_version=page.resource_version, timeout_seconds=None)
        await api.patch(CM, "m", {"data": {"big": "y"}})
        event = await anext(aiter(events))
        assert event.type == "MODIFIED" and event.object["kind"] == "ConfigMap" and "data" not in event.object


async def test_a_requeue_after_an_hour_runs_when_the_test_steps_an_hour() -> None:
    """Manager(clock=cluster.clock): RequeueAfter timers and the cluster's timestamps move together."""
    from kubeop.controller import Context, Controller, Request, Result

    cluster = FakeCluster()
    seen: list[str] = []

    async def reconcile(req: Request, ctx: Context) -> Result:
        seen.append(ctx.clock.utcnow().strftime("%H:%M"))
        return Result(requeue_after=3600)

    manager = Manager(
        cluster.client(), clock=cluster.clock, serving=Serving(metrics_address=None, health_address=None)
    )
    manager.add(Controller.for_(CM).named("hourly").reconcile(reconcile))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    async with cluster.client() as api:
        await api.create(cm("tick"))

        await until(lambda: len(seen) >= 1)
        cluster.step(3599)
        await asyncio.sleep(0.01)
        assert len(seen) == 1
        cluster.step(1)
        await until(lambda: len(seen) >= 2)
        later = (await api.create(cm("later")))["metadata"]["creationTimestamp"]
        assert abs(dt.datetime.fromisoformat(later) - cluster.clock.utcnow()) < dt.timedelta(seconds=2)
    stop.set()
    await task


async def test_deleting_a_crd_deletes_its_objects_as_watchers_see() -> None:
    cluster = FakeCluster()
    cluster.add_crd(Demo)
    async with cluster.client() as api:
        rv = (await api.list(Demo.resource)).resource_version
        await api.create({"apiVersion": "yuerblog.cc/v1", "kind": "Demo", "metadata": {"name": "d"}})
        events = api.watch(Demo.resource, resource_version=rv)
        assert (await anext(events)).type == "ADDED"  # the watch is open from here on
        await api.delete("customresourcedefinitions", "demos.yuerblog.cc")
        deleted = await anext(events)
        assert (deleted.type, deleted.object["metadata"]["name"]) == ("DELETED", "d")
        await events.aclose()


async def test_the_pytest_plugin_hands_out_a_fresh_fake_cluster(fake_cluster: FakeCluster) -> None:
    async with fake_cluster.client() as api:
        assert [o["metadata"]["name"] for o in await api.list(CM)] == []
