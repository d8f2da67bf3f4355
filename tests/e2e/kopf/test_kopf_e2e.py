"""kopf's handler API on the real control plane: causes fire once per change, writes per change
are counted, retries honour their delay, and a change made while the operator was down runs the
update handler once on its next start.

Writes are counted by the processor (every request it sends to the handled object) and, apart
from it, by the operator's client (every write request it sent). kopf's writes for the same
handlers, from its code (kopf/_core/reactor/processing.py, kopf/_cogs/clients/patching.py), on a
kind with a status subresource: a creation is 3 requests (the finalizer's JSON patch in a cycle of
its own, then a merge patch of the annotations with the last-handled configuration, then a merge
patch of the status subresource with the handler's result); an update with a result is 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

import kubeop.kopf as kopf
from kubeop.client import Client, load_kubeconfig
from kubeop.kopf.processing import Processor
from kubeop.kopf.running import processors, run_manager
from kubeop.manager import Manager
from kubeop.testing import ControlPlane
from tests.support.crds import widget_crd

pytestmark = pytest.mark.controlplane
T = TypeVar("T")

GROUP = "kopf-e2e.kubeop.dev"
PLURAL = "kopfwidgets"
RESOURCE = f"{PLURAL}.{GROUP}"
CRD = widget_crd(GROUP, plural=PLURAL, kind="KopfWidget", free_spec=True)


@pytest.fixture(scope="module")
def crd(control_plane: ControlPlane) -> str:
    control_plane.install_crds([CRD])
    return RESOURCE


@pytest.fixture
async def client(kubeconfig_path: str, namespace: str, crd: str) -> AsyncIterator[Client]:
    async with Client(load_kubeconfig(kubeconfig_path, namespace=namespace, qps=None)) as c:
        yield c


async def eventually(fn: Callable[[], Awaitable[T] | T], timeout: float = 20.0, what: str = "it") -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = fn()
            if asyncio.iscoroutine(last):
                last = await last
        except Exception as exc:
            last = exc
        else:
            if last:
                return last  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")
        await asyncio.sleep(0.05)


class Counted:
    """The operator's processor and, independently of it, the write requests its client sent."""

    def __init__(self, processor: Processor, requests: dict[str, int]) -> None:
        self.processor, self.requests = processor, requests

    @property
    def writes(self) -> int:
        sent = sum(n for method, n in self.requests.items() if method in ("PATCH", "PUT", "POST", "DELETE"))
        assert sent == self.processor.writes, (
            f"client sent {self.requests}, processor counted {self.processor.writes}"
        )
        return sent


@contextlib.asynccontextmanager
async def operator(registry: kopf.Registry, kubeconfig: str, namespace: str) -> AsyncIterator[Counted]:
    """Run the registry's handlers in a kubeop Manager (own client) for the body of the block."""
    api = Client(load_kubeconfig(kubeconfig, qps=None))
    requests: dict[str, int] = {}

    def observe(method: str, code: str, seconds: float) -> None:
        requests[method] = requests.get(method, 0) + 1

    api.transport.observer = observe
    manager: Manager = kopf.build_manager(registry=registry, namespace=namespace, client=api)
    stop = asyncio.Event()
    task = asyncio.create_task(run_manager(manager, stop))
    try:
        await eventually(
            lambda: manager._synced or (task.done() and task.result()), 30, "the operator to start"
        )
        (processor,) = processors(manager)
        yield Counted(processor, requests)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await api.close()


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "KopfWidget", "metadata": {"name": name}, "spec": spec}


async def get(client: Client, name: str) -> dict[str, Any] | None:
    with contextlib.suppress(Exception):
        return await client.get(RESOURCE, name)  # type: ignore[no-any-return]
    return None


async def test_create_update_delete_once_each_with_counted_writes(
    client: Client, kubeconfig_path: str, namespace: str
) -> None:
    reg = kopf.Registry()
    calls: list[tuple[str, Any]] = []

    @kopf.on.create(RESOURCE, registry=reg, id="create_fn")
    async def create_fn(spec: Any, name: str, retry: int, reason: str, **_: Any) -> Any:
        calls.append(("create", (dict(spec), name, retry, reason)))
        return {"message": "hello"}

    @kopf.on.update(RESOURCE, registry=reg, id="update_fn")
    def update_fn(diff: Any, old: Any, new: Any, patch: kopf.Patch, **_: Any) -> Any:  # sync: a thread
        calls.append(("update", tuple(diff)))
        patch.status["seen"] = new["spec"]["field"]
        return old["spec"]["field"]

    @kopf.on.field(RESOURCE, registry=reg, field="spec.field")
    async def field_fn(old: Any, new: Any, diff: Any, **_: Any) -> None:
        calls.append(("field", (old, new, tuple(diff))))

    @kopf.on.delete(RESOURCE, registry=reg)
    async def delete_fn(body: kopf.Body, **_: Any) -> None:
        calls.append(("delete", body.meta.name))

    async with operator(reg, kubeconfig_path, namespace) as proc:
        await client.create(widget("w1", field="a"))
        obj = await eventually(
            lambda: _with(get(client, "w1"), lambda o: (o.get("status") or {}).get("create_fn")),
            what="create",
        )
        assert obj["status"]["create_fn"] == {"message": "hello"}
        assert kopf.FINALIZER in obj["metadata"]["finalizers"]
        await asyncio.sleep(0.5)  # nothing more may come
        assert [c[0] for c in calls] == ["create", "field"]
        assert calls[0][1] == ({"field": "a"}, "w1", 0, "create")
        assert calls[1][1] == (None, "a", (("add", (), None, "a"),))
        create_writes = proc.writes
        assert create_writes == 2, "the finalizer, then the result + state in one status write"

        calls.clear()
        await client.patch(RESOURCE, "w1", {"spec": {"field": "b"}})
        obj = await eventually(
            lambda: _with(get(client, "w1"), lambda o: (o.get("status") or {}).get("update_fn")),
            what="update",
        )
        await asyncio.sleep(0.5)
        assert obj["status"]["update_fn"] == "a" and obj["status"]["seen"] == "b"
        assert sorted(c[0] for c in calls) == ["field", "update"]
        assert ("update", (("change", ("spec", "field"), "a", "b"),)) in calls
        assert proc.writes - create_writes == 1, "an update with a result is one write"

        # A status change by someone else is no change: no handler, no write.
        calls.clear()
        before = proc.writes
        await client.patch(RESOURCE, "w1", {"status": {"other": 1}}, subresource="status")
        await asyncio.sleep(1.0)
        assert calls == [] and proc.writes == before

        await client.delete(RESOURCE, "w1")
        await eventually(lambda: _absent(get(client, "w1")), what="the object to go")
        assert calls == [("delete", "w1")]
        assert proc.writes - before == 1, "the deletion handler's outcome and the finalizer's removal in one"


async def _with(aw: Awaitable[dict[str, Any] | None], fn: Callable[[dict[str, Any]], Any]) -> Any:
    obj = await aw
    return obj if obj is not None and fn(obj) else None


async def _absent(aw: Awaitable[dict[str, Any] | None]) -> bool:
    return (await aw) is None


async def test_no_delete_handlers_no_finalizer_and_one_write_per_create(
    client: Client, kubeconfig_path: str, namespace: str
) -> None:
    reg = kopf.Registry()

    @kopf.on.create(RESOURCE, registry=reg)
    async def made(**_: Any) -> None:  # no result: the state goes to the annotation
        return None

    watched: list[Any] = []

    @kopf.on.update(RESOURCE, registry=reg, field="spec.watched")
    async def on_watched(old: Any, new: Any, diff: Any, **_: Any) -> None:
        watched.append((old, new, tuple(diff)))

    async with operator(reg, kubeconfig_path, namespace) as proc:
        await client.create(widget("w2", field="a"))
        obj = await eventually(
            lambda: _with(
                get(client, "w2"),
                lambda o: (
                    "kopf.zalando.org/last-handled-configuration" in o["metadata"].get("annotations", {})
                ),
            ),
            what="the state annotation",
        )
        await asyncio.sleep(0.5)
        assert kopf.FINALIZER not in (obj["metadata"].get("finalizers") or [])
        assert proc.writes == 1
        # A change no handler is interested in: no handler, no write.
        await client.patch(RESOURCE, "w2", {"spec": {"field": "b"}})
        await asyncio.sleep(0.7)
        assert proc.writes == 1 and watched == []
        # The watched field: the handler runs once, sees only its field, one write.
        await client.patch(RESOURCE, "w2", {"spec": {"watched": 1}})
        await eventually(lambda: watched, what="the field's update handler")
        await asyncio.sleep(0.5)
        assert watched == [(None, 1, (("add", (), None, 1),))]
        assert proc.writes == 2


async def test_temporary_error_retried_after_its_delay_and_retries_limit(
    client: Client, kubeconfig_path: str, namespace: str
) -> None:
    reg = kopf.Registry()
    attempts: list[tuple[int, float]] = []
    capped: list[int] = []

    @kopf.on.create(RESOURCE, registry=reg, id="flaky")
    async def flaky(retry: int, **_: Any) -> Any:
        attempts.append((retry, time.monotonic()))
        if retry == 0:
            raise kopf.TemporaryError("not yet", delay=1.5)
        return {"ok": retry}

    @kopf.on.create(RESOURCE, registry=reg, retries=2, id="hopeless")
    async def hopeless(retry: int, **_: Any) -> None:
        capped.append(retry)
        raise kopf.TemporaryError("never", delay=0.2)

    async with operator(reg, kubeconfig_path, namespace):
        await client.create(widget("w3"))
        obj = await eventually(
            lambda: _with(get(client, "w3"), lambda o: (o.get("status") or {}).get("flaky")), what="the retry"
        )
        assert obj["status"]["flaky"] == {"ok": 1}
        assert [a[0] for a in attempts] == [0, 1]
        assert attempts[1][1] - attempts[0][1] >= 1.5
        await asyncio.sleep(1.0)
        assert capped == [0, 1], "retries=2: the second failure is final"
        assert len(attempts) == 2


async def test_downtime_update_and_restart_mid_sequence(
    client: Client, kubeconfig_path: str, namespace: str
) -> None:
    reg = kopf.Registry()
    calls: list[tuple[str, Any]] = []
    fail_second = {"on": True}

    @kopf.on.create(RESOURCE, registry=reg)
    async def first(**_: Any) -> None:
        calls.append(("first", None))

    @kopf.on.create(RESOURCE, registry=reg)
    async def second(retry: int, **_: Any) -> None:
        calls.append(("second", retry))
        if fail_second["on"]:
            raise kopf.TemporaryError("later", delay=1)

    @kopf.on.update(RESOURCE, registry=reg)
    async def changed(diff: Any, **_: Any) -> None:
        calls.append(("update", tuple(diff)))

    @kopf.on.resume(RESOURCE, registry=reg)
    async def resumed(reason: str, **_: Any) -> None:
        calls.append(("resume", reason))

    async with operator(reg, kubeconfig_path, namespace):
        await client.create(widget("w4", field="a"))
        await eventually(lambda: ("second", 0) in calls, what="the first attempt of the second handler")
    # Down, in the middle of the creation: 'first' is done, 'second' is due again.
    assert calls == [("first", None), ("second", 0)]
    calls.clear()
    fail_second["on"] = False
    async with operator(reg, kubeconfig_path, namespace):
        await eventually(lambda: ("second", 1) in calls, what="the second handler's retry after a restart")
        await asyncio.sleep(0.5)
        assert calls == [("second", 1)], (
            "the done handler does not run again; resume does not join a creation"
        )
    calls.clear()
    # Down again; a change meanwhile is an update on the next start, once, with the resume handler.
    await client.patch(RESOURCE, "w4", {"spec": {"field": "b"}})
    async with operator(reg, kubeconfig_path, namespace):
        await eventually(lambda: any(c[0] == "update" for c in calls), what="the update after downtime")
        await asyncio.sleep(0.7)
    assert sorted(calls) == [("resume", "update"), ("update", (("change", ("spec", "field"), "a", "b"),))]
    calls.clear()
    # And a plain restart without changes runs only the resume handler.
    async with operator(reg, kubeconfig_path, namespace):
        await eventually(lambda: calls, what="the resume handler")
        await asyncio.sleep(0.5)
    assert calls == [("resume", "resume")]


async def test_daemons_per_object_stopped_on_delete(
    client: Client, kubeconfig_path: str, namespace: str
) -> None:
    reg = kopf.Registry()
    log: list[str] = []

    @kopf.daemon(RESOURCE, registry=reg, id="sync_daemon")
    def sync_daemon(stopped: Any, name: str, **_: Any) -> None:  # a thread: it must watch `stopped`
        log.append(f"sync start {name}")
        while not stopped:
            stopped.wait(0.1)
        log.append(f"sync stopped {name}")

    @kopf.daemon(RESOURCE, registry=reg, id="async_daemon", cancellation_backoff=0.3)
    async def async_daemon(stopped: Any, name: str, **_: Any) -> None:
        log.append(f"async start {name}")
        try:
            await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            log.append(f"async cancelled {name} stopped={bool(stopped)}")
            raise

    async with operator(reg, kubeconfig_path, namespace) as proc:
        await client.create(widget("d1"))
        await client.create(widget("d2"))
        await eventually(lambda: len([x for x in log if "start" in x]) == 4, what="2 daemons per object")
        await client.patch(RESOURCE, "d1", {"spec": {"field": "x"}})  # a change does not restart them
        await asyncio.sleep(0.5)
        assert sorted(log) == ["async start d1", "async start d2", "sync start d1", "sync start d2"]
        obj = await get(client, "d1")
        assert obj is not None and kopf.FINALIZER in obj["metadata"]["finalizers"]
        writes = proc.writes
        await client.delete(RESOURCE, "d1")
        await eventually(lambda: _absent(get(client, "d1")), what="d1 to go")
        assert "sync stopped d1" in log and "async cancelled d1 stopped=True" in log
        assert not any("d2" in x and "start" not in x for x in log), "d2's daemons keep running"
        assert proc.writes - writes == 1, "the finalizer's removal only"
    assert "sync stopped d2" in log and "async cancelled d2 stopped=True" in log, "stopped with the operator"


async def test_timers_keep_their_interval_and_idle(
    client: Client, kubeconfig_path: str, namespace: str
) -> None:
    reg = kopf.Registry()
    ticks: list[float] = []
    idle_ticks: list[float] = []

    @kopf.timer(RESOURCE, registry=reg, interval=0.4, initial_delay=0.3, id="tick")
    async def tick(**_: Any) -> Any:
        ticks.append(time.monotonic())
        return len(ticks)

    @kopf.timer(RESOURCE, registry=reg, interval=0.2, idle=1.0, id="idle_tick")
    def idle_tick(**_: Any) -> None:
        idle_ticks.append(time.monotonic())

    async with operator(reg, kubeconfig_path, namespace):
        t0 = time.monotonic()
        await client.create(widget("t1", n=0))
        await eventually(lambda: len(ticks) >= 5, what="5 ticks")
        gaps = [b - a for a, b in itertools.pairwise(ticks)]
        assert all(0.35 <= g <= 1.0 for g in gaps), gaps
        assert ticks[0] - t0 >= 0.3
        obj = await get(client, "t1")
        assert obj is not None and isinstance(obj["status"]["tick"], int), "the result goes to status"
        # idle: no call while the object keeps changing
        first_idle = idle_ticks[0]
        assert first_idle - t0 >= 1.0
        for i in range(4):
            await client.patch(RESOURCE, "t1", {"spec": {"n": i + 1}})
            await asyncio.sleep(0.3)
        changed = time.monotonic()
        before = len([t for t in idle_ticks if t > changed - 1.2])
        await eventually(lambda: any(t > changed + 0.6 for t in idle_ticks), what="the idle timer again")
        assert before <= 1, "no idle tick while changes kept coming"


async def test_subhandlers_progress_in_the_one_state_record(
    client: Client, kubeconfig_path: str, namespace: str
) -> None:
    reg = kopf.Registry()
    calls: list[tuple[str, int]] = []

    @kopf.on.create(RESOURCE, registry=reg, id="parent")
    async def parent(spec: Any, retry: int, **_: Any) -> Any:
        calls.append(("parent", retry))
        for item in spec["items"]:

            @kopf.subhandler(id=item)
            async def child(retry: int, item: str = item, **_: Any) -> Any:
                calls.append((item, retry))
                if item == "b" and retry == 0:
                    raise kopf.TemporaryError("b later", delay=0.3)
                return item.upper()

        kopf.register(lambda **_: None, id="plain")
        return "parent done"

    async with operator(reg, kubeconfig_path, namespace) as proc:
        await client.create(widget("w9", items=["a", "b"]))
        obj = await eventually(
            lambda: _with(get(client, "w9"), lambda o: (o.get("status") or {}).get("parent")), what="parent"
        )
        await asyncio.sleep(0.5)
        assert calls == [("parent", 0), ("a", 0), ("b", 0), ("parent", 1), ("b", 1)], (
            "the done sub-handlers do not run again; the parent does, to register them"
        )
        status = obj["status"]
        assert status["parent/a"] == "A" and status["parent/b"] == "B" and status["parent"] == "parent done"
        # No finalizer (no delete handler); the first cycle (a's result, b's retry, the progress
        # of all three) and the second (b's and the parent's results, the essence): one write each.
        assert proc.writes == 2
    with pytest.raises(RuntimeError, match="inside a running handler"):
        kopf.subhandler(id="x")


async def test_index_from_the_shared_informer_is_a_handler_kwarg(
    client: Client, kubeconfig_path: str, namespace: str
) -> None:
    reg = kopf.Registry()
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "labels": {"app": "x"}}}
    await client.create(cm)  # listed before the first handler runs

    @kopf.index("configmaps", registry=reg, id="by_app", labels={"app": kopf.PRESENT})
    def by_app(labels: Any, name: str, **_: Any) -> Any:
        return {labels["app"]: name}

    @kopf.on.create(RESOURCE, registry=reg, id="create_fn")
    def create_fn(by_app: kopf.Index[str, str], **_: Any) -> Any:
        return sorted(by_app.get("x", ()))

    @kopf.on.update(RESOURCE, registry=reg, id="update_fn")
    def update_fn(by_app: kopf.Index[str, str], **_: Any) -> Any:
        return {k: sorted(v) for k, v in by_app.items()}

    async with operator(reg, kubeconfig_path, namespace):
        await client.create(widget("w10", field="a"))
        obj = await eventually(
            lambda: _with(get(client, "w10"), lambda o: "create_fn" in (o.get("status") or {})), what="create"
        )
        assert obj["status"]["create_fn"] == ["c1"]
        await client.delete("configmaps", "c1")
        await client.create({**cm, "metadata": {"name": "c2", "labels": {"app": "y"}}})
        await asyncio.sleep(0.5)
        await client.patch(RESOURCE, "w10", {"spec": {"field": "b"}})
        obj = await eventually(
            lambda: _with(get(client, "w10"), lambda o: "update_fn" in (o.get("status") or {})), what="update"
        )
        assert obj["status"]["update_fn"] == {"y": ["c2"]}
