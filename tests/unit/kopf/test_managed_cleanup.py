"""settings.admission.managed at stop: both configurations are patched down to the persistent
webhooks, each on its own and with retries, on kubeop.testing.FakeCluster with injected failures."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.client import Client
from kubeop.kopf import serving
from kubeop.kopf.admission import admission_handlers
from kubeop.kopf.serving import MUTATING, VALIDATING, serve_admission
from kubeop.testing import FakeCluster

NAME = "auto.kubeop.dev"


def handler(**_: Any) -> None: ...


async def server(fn: Any) -> AsyncIterator[kopf.WebhookClientConfig]:
    """A server that serves nothing: one client config, then waits to be closed."""
    yield kopf.WebhookClientConfig(url="https://127.0.0.1:1/", caBundle="Q0E=")
    await asyncio.Event().wait()


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {within} s")
        await asyncio.sleep(0.01)


async def names(api: Client, resource: Any) -> list[str] | None:
    obj = await api.get_or_none(resource, NAME)
    return None if obj is None else [w["name"] for w in obj.get("webhooks") or []]


class Admission:
    """serve_admission with a validating, a persistent validating and a mutating handler."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.api = cluster.client()
        reg = kopf.Registry()
        kopf.on.validate("configmaps", registry=reg, id="check")(handler)
        kopf.on.validate("configmaps", registry=reg, id="keep", persistent=True)(handler)
        kopf.on.mutate("configmaps", registry=reg, id="fill")(handler)
        settings = kopf.OperatorSettings()
        settings.admission.server = server
        settings.admission.managed = NAME
        self.stop = asyncio.Event()
        self.task = asyncio.ensure_future(
            serve_admission(
                admission_handlers(reg), settings=settings, client=self.api, memo={}, stop=self.stop
            )
        )

    async def __aenter__(self) -> Admission:
        async def written() -> bool:
            return await names(self.api, MUTATING) == [f"fill.{NAME}"]

        await eventually(written)
        assert await names(self.api, VALIDATING) == [f"check.{NAME}", f"keep.{NAME}"]
        return self

    async def __aexit__(self, *_: object) -> None:
        if not self.task.done():
            self.task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await self.task
        await self.api.close()

    async def stopped(self, within: float = 15.0) -> float:
        """Stop; the seconds it took."""
        t0 = time.monotonic()
        self.stop.set()
        async with asyncio.timeout(within):
            await self.task
        return time.monotonic() - t0

    async def cleaned(self) -> tuple[list[str] | None, list[str] | None]:
        return await names(self.api, VALIDATING), await names(self.api, MUTATING)


async def test_transient_write_failures_of_both_configurations_are_retried() -> None:
    cluster = FakeCluster()
    async with Admission(cluster) as admission:
        cluster.fail("PATCH", VALIDATING, NAME, code=503, times=2)
        cluster.fail("PATCH", MUTATING, NAME, code=500, times=2)
        assert await admission.stopped() < 5.0
        assert await admission.cleaned() == ([f"keep.{NAME}"], [])


async def test_a_validating_configuration_that_cannot_be_written_does_not_keep_the_mutating_dirty(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    async with Admission(cluster) as admission:
        cluster.fail("PATCH", VALIDATING, NAME, code=403, times=None)  # permanent: not retried
        cluster.fail("PATCH", MUTATING, NAME, code=429, times=1)
        with caplog.at_level(logging.INFO, logger="kubeop.kopf.admission"):
            assert await admission.stopped() < 5.0
        assert await admission.cleaned() == ([f"check.{NAME}", f"keep.{NAME}"], [])
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    dirty = [m for m in errors if "stayed dirty" in m]
    assert len(dirty) == 1, errors
    assert f"ValidatingWebhookConfiguration {NAME} stayed dirty: Forbidden" in dirty[0]
    assert "after 1 attempt" in dirty[0] and "kubectl edit validatingwebhookconfigurations" in dirty[0]
    assert any(
        f"Cleaned up the MutatingWebhookConfiguration {NAME}" in r.getMessage() for r in caplog.records
    )


async def test_a_mutating_configuration_that_cannot_be_written_does_not_keep_the_validating_dirty() -> None:
    cluster = FakeCluster()
    async with Admission(cluster) as admission:
        cluster.fail("PATCH", MUTATING, NAME, code=422, times=None)
        await admission.stopped()
        assert await admission.cleaned() == ([f"keep.{NAME}"], [f"fill.{NAME}"])


async def test_a_cancelled_operator_still_cleans_both_through_transient_failures() -> None:
    cluster = FakeCluster()
    async with Admission(cluster) as admission:
        cluster.fail("PATCH", VALIDATING, NAME, code=500, times=2)
        cluster.fail("PATCH", MUTATING, NAME, code=504, times=1)
        admission.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            async with asyncio.timeout(15.0):
                await admission.task
        assert await admission.cleaned() == ([f"keep.{NAME}"], [])


async def test_stop_never_hangs_on_a_server_that_keeps_failing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(serving, "_CLEANUP_SECONDS", 0.8)
    cluster = FakeCluster()
    async with Admission(cluster) as admission:
        cluster.fail("PATCH", VALIDATING, NAME, code=503, times=None)
        cluster.fail("PATCH", MUTATING, NAME, code=500, times=None)
        with caplog.at_level(logging.WARNING, logger="kubeop.kopf.admission"):
            assert await admission.stopped() < 1.5
        tries = sum(1 for r in caplog.records if "retrying in" in r.getMessage())
        assert 2 <= tries <= 12, tries  # a backoff, not a busy loop
    dirty = sorted(
        r.getMessage().split(" stayed")[0] for r in caplog.records if "stayed dirty" in r.getMessage()
    )
    assert dirty == [f"The MutatingWebhookConfiguration {NAME}", f"The ValidatingWebhookConfiguration {NAME}"]


async def test_a_configuration_deleted_meanwhile_is_not_created_again_at_stop() -> None:
    cluster = FakeCluster()
    async with Admission(cluster) as admission:
        await admission.api.delete(MUTATING, NAME)
        await admission.stopped()
        assert await admission.cleaned() == ([f"keep.{NAME}"], None)
