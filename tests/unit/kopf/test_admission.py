"""``@kopf.on.validate`` / ``@kopf.on.mutate`` answered by kubeop's webhook registry (no sockets)."""

from __future__ import annotations

import asyncio
import base64
import os
import threading
import time
from typing import Any

import orjson
import pytest

import kubeop.kopf as kopf
from kubeop.kopf.admission import admission_handlers, webhooks
from kubeop.webhook import Webhooks


def review(operation: str = "CREATE", sub: str | None = None, **spec: Any) -> bytes:
    obj = {
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "metadata": {"name": "x", "namespace": "ns", "labels": {"somelabel": "somevalue"}},
        "spec": spec,
        "status": {},
    }
    request: dict[str, Any] = {
        "uid": "u1",
        "kind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
        "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
        "name": "x",
        "namespace": "ns",
        "operation": operation,
        "userInfo": {"username": "alice"},
        "object": obj,
        "oldObject": obj if operation == "UPDATE" else None,
        "dryRun": False,
    }
    if sub:
        request["subResource"] = sub
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


async def answer(hooks: Webhooks, path: str, body: bytes) -> dict[str, Any]:
    status, out = await hooks.handle(path, body)
    assert status == 200
    return orjson.loads(out)["response"]  # type: ignore[no-any-return]


async def test_validate_and_mutate_with_kopfs_kwargs_errors_warnings_and_filters() -> None:
    reg = kopf.Registry()
    seen: list[tuple[Any, ...]] = []

    @kopf.on.validate("kopfexamples.kopf.dev", registry=reg, id="check")
    def check(spec: Any, warnings: list[str], operation: str, userinfo: Any, dryrun: bool, **_: Any) -> None:
        seen.append((operation, userinfo["username"], dryrun))
        warnings.append("looked at it")
        if spec.get("field") == "wrong":
            raise kopf.AdmissionError("Meh! Change the field.", code=555)

    @kopf.on.validate("kopfexamples.kopf.dev", registry=reg, id="status_only", subresource="status")
    def status_only(**_: Any) -> None:
        raise kopf.AdmissionError("no status writes")

    @kopf.on.validate("kopfexamples.kopf.dev", registry=reg, id="updates", operation="UPDATE")
    def updates(**_: Any) -> None:
        raise ValueError("boom")

    @kopf.on.mutate("kopfexamples.kopf.dev", registry=reg, id="inject", labels={"somelabel": "somevalue"})
    async def inject(patch: kopf.Patch, **_: Any) -> None:
        patch.spec["injected"] = 123

    hooks = Webhooks(webhooks(admission_handlers(reg), memo={}))
    assert sorted(w.path for w in hooks.admission) == ["/check", "/inject", "/status_only", "/updates"]

    ok = await answer(hooks, "/check", review(field="fine"))
    assert ok["allowed"] is True and ok["warnings"] == ["looked at it"]
    assert seen == [("CREATE", "alice", False)]
    denied = await answer(hooks, "/check", review(field="wrong"))
    assert denied["allowed"] is False and denied["status"]["code"] == 555
    assert denied["status"]["message"] == "Meh! Change the field."

    assert (await answer(hooks, "/status_only", review()))["allowed"] is True, "main resource: not its own"
    assert (await answer(hooks, "/status_only", review(sub="status")))["allowed"] is False
    assert (await answer(hooks, "/updates", review()))["allowed"] is True, "CREATE: not its operation"
    failed = await answer(hooks, "/updates", review("UPDATE"))
    assert failed["allowed"] is False and failed["status"] == {
        "status": "Failure",
        "code": 500,
        "message": "boom",
    }

    mutated = await answer(hooks, "/inject", review(field="x"))
    assert mutated["allowed"] is True and mutated["patchType"] == "JSONPatch"
    ops = orjson.loads(base64.b64decode(mutated["patch"]))
    assert ops == [{"op": "add", "path": "/spec/injected", "value": 123}]


def test_admission_decorator_checks_name_the_handler() -> None:
    reg = kopf.Registry()
    with pytest.raises(TypeError, match=r"@kopf.on.validate of '.*fn': unknown argument\(s\) interval"):

        @kopf.on.validate("kex", registry=reg, interval=1)
        def fn(**_: Any) -> None: ...

    with pytest.raises(ValueError, match="operation 'PATCH' is not one of"):
        kopf.on.mutate("kex", registry=reg, operation="PATCH")(lambda **_: None)
    with pytest.raises(ValueError, match=r"@kopf.on.validate of .*field"):
        kopf.on.validate("kex", registry=reg, field="spec..x")(lambda **_: None)


async def test_a_stuck_sync_handler_has_its_own_threads_and_is_refused_once_they_are_all_stuck() -> None:
    reg = kopf.Registry()
    release = threading.Event()

    @kopf.on.validate("kopfexamples.kopf.dev", registry=reg, id="stuck")
    def stuck(**_: Any) -> None:
        release.wait(20)

    @kopf.on.validate("kopfexamples.kopf.dev", registry=reg, id="quick")
    def quick(**_: Any) -> None:
        return None

    hooks = Webhooks(webhooks(admission_handlers(reg), memo={}))
    default_pool = min(32, (os.cpu_count() or 1) + 4)  # asyncio.to_thread's threads: main used them
    try:
        first = await asyncio.gather(*(hooks.handle("/stuck", review(), 0.5) for _ in range(default_pool)))
        assert all(not orjson.loads(out)["response"]["allowed"] for _, out in first)
        t0 = time.monotonic()
        _, quick_out = await hooks.handle("/quick", review(), 1)
        assert orjson.loads(quick_out)["response"]["allowed"] is True  # main: denied by timeout
        _, stuck_out = await hooks.handle("/stuck", review(), 1)
        refused = orjson.loads(stuck_out)["response"]
        assert time.monotonic() - t0 < 0.5
        assert refused["allowed"] is False and refused["status"]["message"] == (
            "handler 'stuck' has 4 calls still running past their deadline (all of webhook "
            "stuck.kopf.kubeop.dev's 4 threads): denied at once"
        )
    finally:
        release.set()


async def test_a_cancelled_error_from_a_handler_denies_naming_it() -> None:
    """Not an escaping CancelledError (no verdict: the API server's failurePolicy decided)."""
    import concurrent.futures

    from kubeop.kopf.admission import admission_fn

    reg = kopf.Registry()

    @kopf.on.validate("kopfexamples.kopf.dev", registry=reg, id="awaits_cancelled")
    async def awaits_cancelled(**_: Any) -> None:
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future

    @kopf.on.validate("kopfexamples.kopf.dev", registry=reg, id="result_of_cancelled")
    def result_of_cancelled(**_: Any) -> None:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        future.cancel()
        future.result()

    hooks = Webhooks(webhooks(admission_handlers(reg), memo={}))
    fn = admission_fn(admission_handlers(reg), memo={})
    for handler_id in ("awaits_cancelled", "result_of_cancelled"):
        for out in (
            await answer(hooks, f"/{handler_id}", review()),
            (await fn(orjson.loads(review()), webhook=handler_id))["response"],
        ):
            assert out["allowed"] is False and out["status"]["code"] == 500
            assert repr(handler_id) in out["status"]["message"]
            assert "CancelledError" in out["status"]["message"]
