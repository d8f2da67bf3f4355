"""Helm's release storage, decoded from Secrets and read from a cache."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from typing import Any

import pytest

from kubeop.helm.releases import ReleaseStore, decode_release, release_from_json, release_from_secret

from .fakes import RELEASE_SECRETS, FakeCluster, FakeHelm

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


async def test_store_history_deployed_and_notifications() -> None:
    cluster = FakeCluster()
    helm = FakeHelm(cluster)
    helm._record("ns", "web", 1, "superseded", "m1", {})
    helm._record("ns", "web", 2, "deployed", "m2", {})
    helm._record("ns", "web", 3, "failed", "m3", {})
    helm._record("other", "web", 1, "deployed", "x", {})
    cluster.store(
        RELEASE_SECRETS,
        {"metadata": {"name": "junk", "namespace": "ns", "labels": {"name": "web"}}, "data": {}},
    )
    store = ReleaseStore(cluster)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        store.history("ns", "web")
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
    helm._record("ns", "web", 4, "deployed", "m4", {})
    assert seen == [("ns", "web", 4)]


async def test_wait_for_sees_later_changes() -> None:
    cluster = FakeCluster()
    helm = FakeHelm(cluster)
    store = ReleaseStore(cluster)  # type: ignore[arg-type]
    await store.start()

    async def later() -> None:
        await asyncio.sleep(0.05)
        helm._record("ns", "web", 1, "deployed", "m", {})

    task = asyncio.create_task(later())
    assert await store.wait_for("ns", "web", lambda h: bool(h), timeout=2)
    await task
    assert not await store.wait_for("ns", "web", lambda h: len(h) > 1, timeout=0.05)
