"""CPU of kubeop.kopf's own handling cycle, without a cluster: kopf_operator.py's two handlers.

A :class:`~kubeop.kopf.processing.Processor` runs the create, the no-op (the event of its own
status write) and the update cycles of N Widgets against a client stub that answers the write
(no HTTP, no informer): the cause, the kwargs, the sync handler's thread hop, the state (kopf's
storages: read, essence, diff, written) and the building of the one write. What run.py measures on top
is the informer, the queue, the HTTP of the status write and the handler's own client calls.

    PYTHONPATH=src .venv/bin/python bench/operator/kopf_cycle_cost.py [--n 2000] [--async]

``--async``: the handlers are coroutines (kopf_operator_async.py's), run without a thread.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from typing import Any

import kubeop.kopf as kopf
from kubeop.core.resource import ApiResource
from kubeop.kopf.processing import ObjectLogger, Processor, objects_log

RESOURCE = "widgets.v1.bench.kubeop.dev"
WIDGETS = ApiResource(
    group="bench.kubeop.dev", version="v1", plural="widgets", kind="Widget", subresources=("status",)
)


def _status(patch: Any, meta: Any, name: str) -> None:
    patch.status["observedGeneration"] = meta["generation"]
    patch.status["configMap"] = name


class Answering:
    """Answers a patch with what it wrote (the processor reads back status.kopf)."""

    async def patch(self, res: Any, name: str, body: Any, namespace: str | None = None, **_: Any) -> Any:
        return {"status": body.get("status")}


def widget(i: int, value: str, state: str | None = None) -> dict[str, Any]:
    meta = {"name": f"w{i:05d}", "namespace": "ns", "uid": f"u{i}", "generation": 1, "resourceVersion": "5"}
    kopf_state = {"last-handled-configuration": state}
    status = {"observedGeneration": 1, "configMap": meta["name"], "kopf": kopf_state} if state else {}
    return {
        "apiVersion": "bench.kubeop.dev/v1",
        "kind": "Widget",
        "metadata": meta,
        "spec": {"value": value},
        "status": status,
    }


async def main(n: int, coroutines: bool) -> None:
    reg = kopf.Registry()

    if coroutines:  # kopf_operator_async.py's handlers (no thread hop)

        @kopf.on.create(RESOURCE, registry=reg)
        async def create_async(name: str, meta: Any, patch: Any, **_: Any) -> None:
            _status(patch, meta, name)

        @kopf.on.update(RESOURCE, registry=reg, field="spec")
        async def update_async(name: str, meta: Any, patch: Any, **_: Any) -> None:
            _status(patch, meta, name)

    else:

        @kopf.on.create(RESOURCE, registry=reg)
        def create(name: str, meta: Any, patch: Any, **_: Any) -> None:
            _status(patch, meta, name)

        @kopf.on.update(RESOURCE, registry=reg, field="spec")
        def update(name: str, meta: Any, patch: Any, **_: Any) -> None:
            _status(patch, meta, name)

    processor = Processor(RESOURCE, list(reg.changing(RESOURCE)))
    client: Any = Answering()
    logger = ObjectLogger(objects_log, {"object_namespace": "ns", "object_name": "w"})
    done = json.dumps({"spec": {"value": "one"}}, separators=(",", ":"))
    phases = (("create", "one", None), ("no-op after its own write", "one", done), ("update", "two", done))
    for label, value, state in phases:
        t0 = time.process_time()
        for i in range(n):
            await processor._cycle(client, WIDGETS, widget(i, value, state), logger)
        print(f"{label}: {(time.process_time() - t0) * 1000 / n:.3f} ms CPU per cycle")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--async", dest="coroutines", action="store_true", help="async handlers")
    parser.add_argument("--profile", help="write cProfile stats of the cycles to this file")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.profile:
        import cProfile

        cProfile.run("asyncio.run(main(args.n, args.coroutines))", args.profile)
    else:
        asyncio.run(main(args.n, args.coroutines))
