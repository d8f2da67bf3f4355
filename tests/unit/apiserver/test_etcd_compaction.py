"""EtcdStorage with ``history``: its etcd is compacted once per ``history`` writes (not after every
write), and a compaction that fails never fails the write that was stored (it is retried after a
later one). Against an in-process stand-in for etcd's JSON gateway on loopback (the storage itself
runs against a real etcd in tests/e2e/apiserver/test_etcd_storage.py). Every wait is bounded."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kubeop.apiserver import EtcdStorage

BOUND = 10.0
HISTORY = 5


class _Gateway:
    """Answers /v3/kv/txn (every put succeeds, one revision each) and /v3/kv/compaction (counted;
    failing with 503 while ``failing``)."""

    def __init__(self) -> None:
        self.revision = 1
        self.compactions: list[int] = []
        self.failing = False

    async def txn(self, request: web.Request) -> web.Response:
        await request.read()
        self.revision += 1
        return web.json_response({"header": {"revision": str(self.revision)}, "succeeded": True})

    async def compaction(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = await request.json()
        self.compactions.append(int(body["revision"]))
        if self.failing:
            return web.json_response({"code": 14, "message": "etcdserver: request timed out"}, status=503)
        return web.json_response({"header": {"revision": str(self.revision)}})


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[_Gateway, str]]:
    fake = _Gateway()
    app = web.Application()
    app.router.add_post("/v3/kv/txn", fake.txn)
    app.router.add_post("/v3/kv/compaction", fake.compaction)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield fake, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}


async def test_history_compacts_once_per_history_writes_not_after_each(
    gateway: tuple[_Gateway, str],
) -> None:
    fake, url = gateway
    storage = EtcdStorage(url, history=HISTORY)
    try:
        async with asyncio.timeout(BOUND):
            for i in range(3 * HISTORY):
                await storage.create("/configmaps", "default", f"c{i}", cm(f"c{i}"))
    finally:
        await storage.close()
    assert 1 <= len(fake.compactions) <= 3, fake.compactions
    # each keeps at least `history` revisions behind the write that sent it
    assert all(b - a >= HISTORY for a, b in zip([0, *fake.compactions], fake.compactions, strict=False))


async def test_a_compaction_that_fails_does_not_fail_the_stored_write_and_is_retried(
    gateway: tuple[_Gateway, str], caplog: pytest.LogCaptureFixture
) -> None:
    fake, url = gateway
    fake.failing = True
    storage = EtcdStorage(url, history=HISTORY)
    try:
        async with asyncio.timeout(BOUND):
            with caplog.at_level(logging.WARNING, logger="kubeop.apiserver"):
                for i in range(2 * HISTORY + 1):
                    stored = await storage.create("/configmaps", "default", f"c{i}", cm(f"c{i}"))
                    assert stored["metadata"]["resourceVersion"] == str(fake.revision)
            assert fake.compactions, "no compaction was attempted"
            assert "etcd history not compacted" in caplog.text
            failed = len(fake.compactions)
            fake.failing = False
            await storage.create("/configmaps", "default", "after", cm("after"))
    finally:
        await storage.close()
    assert len(fake.compactions) == failed + 1  # retried after the next write, and it held
