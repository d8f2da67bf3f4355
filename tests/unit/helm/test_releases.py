"""Helm's release storage, decoded from Secrets and read from a cache."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client
from kubeop.helm.releases import ReleaseStore, decode_release, release_from_json, release_from_secret
from kubeop.testing import FakeCluster

from .fakes import release_secret

DOC = {
    "name": "web",
    "namespace": "ns",
    "version": 2,
    "info": {"status": "deployed", "notes": "n", "description": "Upgrade complete"},
    "chart": {"metadata": {"name": "php", "version": "0.1.0"}},
    "config": {"image": "php:8.3"},
    "manifest": "kind: X\n",
}


def secret_data(doc: dict[str, Any], *, compress: bool = True) -> str:
    raw = json.dumps(doc).encode()
    helm_encoded = base64.b64encode(gzip.compress(raw) if compress else raw)
    return base64.b64encode(helm_encoded).decode()  # and Kubernetes' own base64 on top


def test_decode_helm_storage() -> None:
    secret = {"data": {"release": secret_data(DOC)}}
    rel = release_from_secret(secret)
    assert (rel.name, rel.namespace, rel.version, rel.status) == ("web", "ns", 2, "deployed")
    assert (rel.manifest, rel.config, rel.notes, rel.description) == (
        "kind: X\n",
        {"image": "php:8.3"},
        "n",
        "Upgrade complete",
    )
    assert (rel.chart, rel.chart_version) == ("php", "0.1.0")
    assert rel.deployed and not rel.pending
    uncompressed = release_from_secret({"data": {"release": secret_data(DOC, compress=False)}})
    assert uncompressed == rel


def test_decode_errors() -> None:
    with pytest.raises(ValueError):
        decode_release(base64.b64encode(b"[1, 2]"))
    with pytest.raises(KeyError):
        release_from_secret({"data": {}})


def test_release_from_helm_output_without_config() -> None:
    rel = release_from_json({"name": "web", "version": 1, "info": {"status": "pending-install"}})
    assert rel.config == {} and rel.pending and not rel.deployed


@pytest.fixture
async def client(fake_cluster: FakeCluster) -> AsyncIterator[Client]:
    async with fake_cluster.client() as client:
        for ns in ("ns", "other"):
            await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        yield client


async def record(client: Client, ns: str, name: str, version: int, status: str, manifest: str) -> None:
    """Store a revision as Helm does: a storage Secret written to the (fake) API server."""
    _, secret = release_secret(ns, name, version, status, manifest, {})
    await client.create(secret)


async def eventually(check: Callable[[], bool], timeout: float = 2.0) -> None:
    for _ in range(int(timeout / 0.005)):
        if check():
            return
        await asyncio.sleep(0.005)
    assert check()


async def test_store_history_deployed_and_notifications(client: Client) -> None:
    await record(client, "ns", "web", 1, "superseded", "m1")
    await record(client, "ns", "web", 2, "deployed", "m2")
    await record(client, "ns", "web", 3, "failed", "m3")
    await record(client, "other", "web", 1, "deployed", "x")
    junk = {"apiVersion": "v1", "kind": "Secret", "data": {}}
    await client.create(
        {**junk, "metadata": {"name": "junk", "namespace": "ns", "labels": {"owner": "helm", "name": "web"}}}
    )
    # Not Helm's: the store's watch selects owner=helm, so this one is never seen.
    _, foreign = release_secret("ns", "web", 9, "deployed", "m9", {})
    foreign["metadata"]["labels"]["owner"] = "someone-else"
    await client.create(foreign)
    cache = SharedInformerFactory(client)
    store = ReleaseStore(cache)
    with pytest.raises(RuntimeError):
        store.history("ns", "web")
    try:
        cache.start()
        await store.start()
        await store.start()  # idempotent
        seen: list[tuple[str, str, int]] = []
        store.subscribe(lambda ns, name, version: seen.append((ns, name, version)))
        assert [(r.version, r.status) for r in store.history("ns", "web")] == [
            (1, "superseded"),
            (2, "deployed"),
            (3, "failed"),
        ]
        deployed = store.deployed("ns", "web")
        assert deployed is not None and deployed.manifest == "m2"
        assert store.deployed("ns", "none") is None
        assert store.history("ns", "web")[0] is store.history("ns", "web")[0]  # decoded once
        assert seen == []  # the initial list is not news
        await record(client, "ns", "web", 4, "deployed", "m4")
        await eventually(lambda: bool(seen))
        assert seen == [("ns", "web", 4)]
    finally:
        await cache.stop()


async def test_wait_for_sees_later_changes(client: Client) -> None:
    cache = SharedInformerFactory(client)
    store = ReleaseStore(cache)
    cache.start()
    await store.start()

    async def later() -> None:
        await asyncio.sleep(0.05)
        await record(client, "ns", "web", 1, "deployed", "m")

    try:
        task = asyncio.create_task(later())
        assert await store.wait_for("ns", "web", lambda h: bool(h), timeout=2)
        await task
        assert not await store.wait_for("ns", "web", lambda h: len(h) > 1, timeout=0.05)
    finally:
        await cache.stop()
