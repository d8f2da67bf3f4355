"""``kopf.on.event``: a handler for every watch event of a resource, as the shared informer sees
it (``event={"type": ..., "object": ...}``; ``type`` None for objects listed at start).

Event handlers are not retried and record no state (kopf's semantics): an exception is logged and
the event is gone. One task per resource calls them in the order the events came.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeop.cache import DeletedFinalStateUnknown, FuncHandler
from kubeop.kopf.bodies import Body, Patch
from kubeop.kopf.diffs import FieldPath, resolve
from kubeop.kopf.events import current_body
from kubeop.kopf.handlers import MISSING, Filter, check, prematches
from kubeop.kopf.resource import Resource

__all__ = ["EventDispatcher", "WatchingHandler"]

log = logging.getLogger("kubeop.kopf.objects")


@dataclass(frozen=True)
class WatchingHandler:
    fn: Callable[..., Any]
    id: str
    resource: str
    field: FieldPath = ()
    value: Filter = None
    labels: Mapping[str, Filter] | None = None
    annotations: Mapping[str, Filter] | None = None
    when: Callable[..., bool] | None = None
    param: Any = None

    def __str__(self) -> str:
        return f"Handler {self.id!r}"


class EventDispatcher:
    """Feeds one resource's watch events to its event handlers, in order."""

    def __init__(self, handlers: list[WatchingHandler], memo: Mapping[str, Any], cluster: str = "") -> None:
        """``cluster``: the handlers' ``cluster`` kwarg, the cluster's name in a fleet (kubeop's
        extension; ``""`` on one cluster)."""
        self.handlers = handlers
        self.memo = memo
        self.cluster = cluster
        self.resource: Resource | None = None  # the ``resource`` kwarg, once the informer's is known
        self._queue: asyncio.Queue[tuple[str | None, Any]] = asyncio.Queue()

    def informer_handler(self) -> FuncHandler:
        put = self._queue.put_nowait

        def on_delete(obj: Any) -> None:
            if isinstance(obj, DeletedFinalStateUnknown):
                obj = obj.obj
            if obj is not None:
                put(("DELETED", obj))

        return FuncHandler(
            on_add=lambda obj, initial: put((None if initial else "ADDED", obj)),
            on_update=lambda old, new: put(("MODIFIED", new)),
            on_delete=on_delete,
        )

    async def run(self) -> None:
        while True:
            type_, obj = await self._queue.get()
            await self.dispatch(type_, obj)

    async def dispatch(self, type_: str | None, obj: Mapping[str, Any]) -> None:
        md = obj.get("metadata") or {}
        ns, name = md.get("namespace"), md.get("name")
        extra = {"object_namespace": ns, "object_name": name}
        if self.cluster:  # a fleet's: the cluster in every line of the handlers' logger
            extra["cluster"] = self.cluster
        logger = logging.LoggerAdapter(log, extra)
        prefix = f"[{ns}/{name}] " if ns else f"[{name}] "
        body = Body(obj)
        kwargs: dict[str, Any] = {
            "event": {"type": type_, "object": obj},
            "type": type_,
            "body": body,
            "spec": body.spec,
            "meta": body.meta,
            "status": body.status,
            "name": name,
            "namespace": ns,
            "uid": md.get("uid"),
            "labels": body.meta.labels,
            "annotations": body.meta.annotations,
            "logger": logger,
            "patch": Patch(),  # not written: event handlers only watch (as in kopf, use the API)
            "memo": self.memo,
            "resource": self.resource,
            "cluster": self.cluster,
        }
        for h in self.handlers:
            if not prematches(h, obj, kwargs):
                continue
            if h.field:
                value = resolve(obj, h.field, MISSING)
                if (h.value is None and value is MISSING) or (
                    h.value is not None and not check(h.value, value, kwargs)
                ):
                    continue
            token = current_body.set(obj)
            try:
                if inspect.iscoroutinefunction(h.fn):
                    await h.fn(**kwargs, param=h.param)
                else:
                    await asyncio.to_thread(h.fn, **kwargs, param=h.param)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("%s%s failed with an exception and will ignore it: %s", prefix, h, exc)
            else:
                log.info("%s%s succeeded.", prefix, h)
            finally:
                current_body.reset(token)
