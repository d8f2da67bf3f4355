"""The same operator written without a framework: asyncio + aiohttp + orjson, one list+watch per
kind, an in-memory cache, a set of dirty keys and N workers. The floor a framework is measured
against (it has no backoff, no metrics, no leader election, no resync).

Run: KUBECONFIG=... python lean_operator.py [workers]
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import sys
import tempfile
from typing import Any

import aiohttp
import orjson
import yaml

GROUP = "/apis/bench.kubeop.dev/v1"


def load() -> tuple[str, ssl.SSLContext]:
    cfg = yaml.safe_load(open(os.environ["KUBECONFIG"]))
    cluster = cfg["clusters"][0]["cluster"]
    user = cfg["users"][0]["user"]
    ctx = ssl.create_default_context(cafile=cluster.get("certificate-authority"))
    if "client-certificate" in user:
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
    elif "client-certificate-data" in user:
        d = tempfile.mkdtemp()
        open(f"{d}/c", "wb").write(base64.b64decode(user["client-certificate-data"]))
        open(f"{d}/k", "wb").write(base64.b64decode(user["client-key-data"]))
        ctx.load_cert_chain(f"{d}/c", f"{d}/k")
    return cluster["server"], ctx


class Lean:
    def __init__(self, server: str, ctx: ssl.SSLContext, workers: int) -> None:
        self.server, self.ctx, self.workers = server, ctx, workers
        self.widgets: dict[str, dict[str, Any]] = {}
        self.cms: dict[str, dict[str, Any]] = {}
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.dirty: set[str] = set()

    def enqueue(self, key: str) -> None:
        if key not in self.dirty:
            self.dirty.add(key)
            self.queue.put_nowait(key)

    async def watch(self, path: str, store: dict[str, dict[str, Any]], owner: bool) -> None:
        async with self.session.get(self.server + path) as r:
            data = orjson.loads(await r.read())
        for o in data["items"]:
            k = f"{o['metadata']['namespace']}/{o['metadata']['name']}"
            store[k] = o
            self.enqueue(k)
        rv = data["metadata"]["resourceVersion"]
        self.synced += 1
        while True:
            query = f"watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=300"
            url = f"{self.server}{path}?{query}"
            async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=None)) as r:
                async for line in r.content:
                    ev = orjson.loads(line)
                    o = ev["object"]
                    rv = o["metadata"]["resourceVersion"]
                    if ev["type"] == "BOOKMARK":
                        continue
                    k = f"{o['metadata']['namespace']}/{o['metadata']['name']}"
                    if ev["type"] == "DELETED":
                        store.pop(k, None)
                    else:
                        store[k] = o
                    self.enqueue(k)

    async def worker(self) -> None:
        while True:
            key = await self.queue.get()
            self.dirty.discard(key)
            try:
                await self.reconcile(key)
            except Exception as exc:
                print("error", key, exc, file=sys.stderr)
                await asyncio.sleep(0.5)
                self.enqueue(key)

    async def reconcile(self, key: str) -> None:
        w = self.widgets.get(key)
        if w is None:
            return
        ns, name = key.split("/")
        value = w["spec"]["value"]
        cm = self.cms.get(key)
        if cm is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "ownerReferences": [
                        {
                            "apiVersion": "bench.kubeop.dev/v1",
                            "kind": "Widget",
                            "name": name,
                            "uid": w["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "data": {"value": value},
            }
            async with self.session.post(
                f"{self.server}/api/v1/namespaces/{ns}/configmaps",
                data=orjson.dumps(body),
                headers={"Content-Type": "application/json"},
            ) as r:
                if r.status == 201:
                    self.cms[key] = orjson.loads(await r.read())
                elif r.status != 409:
                    raise RuntimeError(f"create {r.status}")
        elif cm.get("data", {}).get("value") != value:
            async with self.session.patch(
                f"{self.server}/api/v1/namespaces/{ns}/configmaps/{name}",
                data=orjson.dumps({"data": {"value": value}}),
                headers={"Content-Type": "application/merge-patch+json"},
            ) as r:
                if r.status >= 300:
                    raise RuntimeError(f"patch {r.status}")
                self.cms[key] = orjson.loads(await r.read())
        gen = w["metadata"]["generation"]
        st = w.get("status") or {}
        if st.get("observedGeneration") != gen:
            async with self.session.patch(
                f"{self.server}{GROUP}/namespaces/{ns}/widgets/{name}/status",
                data=orjson.dumps({"status": {"observedGeneration": gen, "configMap": name}}),
                headers={"Content-Type": "application/merge-patch+json"},
            ) as r:
                if r.status >= 300:
                    raise RuntimeError(f"status {r.status}")
                new = orjson.loads(await r.read())
                cur = self.widgets.get(key)
                if cur is None or int(cur["metadata"]["resourceVersion"]) < int(
                    new["metadata"]["resourceVersion"]
                ):
                    self.widgets[key] = new

    async def run(self) -> None:
        self.synced = 0
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self.ctx, limit=100))
        tasks = [
            asyncio.create_task(self.watch(f"{GROUP}/widgets", self.widgets, False)),
            asyncio.create_task(self.watch("/api/v1/configmaps", self.cms, True)),
        ]
        while self.synced < 2:
            await asyncio.sleep(0.01)
        tasks += [asyncio.create_task(self.worker()) for _ in range(self.workers)]
        print("ready", flush=True)
        await asyncio.gather(*tasks)


if __name__ == "__main__":
    server, ctx = load()
    asyncio.run(Lean(server, ctx, int(sys.argv[1]) if len(sys.argv) > 1 else 16).run())
