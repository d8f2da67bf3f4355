"""An in-memory API server collection with list/watch semantics, and a ListerWatcher over it.

Enough of the real thing to drive the watcher's state machine: resourceVersions, a bounded
history that compaction cuts (-> 410 for watches and continue tokens from before it), paged lists
with continue tokens, streaming lists (sendInitialEvents + the initial-events-end bookmark) that
can be switched off (-> 400 as an old server answers), bookmarks, and fault injection: the server
going down (connection errors, open streams broken), injected request errors, frozen streams.
Objects handed out are fresh copies, as decoded JSON would be.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

from kubeop.cache.probe import ServerProbe
from kubeop.client.client import ObjectList
from kubeop.client.transport import ApiConnectionError
from kubeop.client.watch import WatchEvent
from kubeop.core.errors import BadRequest, Expired, error_from_status

Obj = dict[str, Any]

_END = object()


def too_large_rv_error() -> Exception:
    return error_from_status(
        {
            "code": 504,
            "reason": "Timeout",
            "message": "Too large resource version: 999, current: 5",
            "details": {
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]
            },
        }
    )


class FakeStream:
    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.frozen = False
        self.closed = False
        self.delivered_rv = ""  # a periodic bookmark never claims more than was sent


class FakeServer:
    def __init__(
        self, *, streaming: bool = True, namespace: str = "default", bookmark_interval: float | None = None
    ) -> None:
        self.streaming = streaming
        self.bookmark_interval = bookmark_interval  # like the API server's "about every minute"
        self.namespace = namespace
        self.rv = 100
        self.objects: dict[str, Obj] = {}
        self.history: list[tuple[int, str, Obj]] = []
        self.compacted = 0
        self.streams: set[FakeStream] = set()
        self.down = False
        self.errors: list[Exception] = []  # raised by the next requests, one each
        self.requests: list[str] = []  # "list" / "watch" / "stream-list", in order
        self.fail_at: dict[int, Exception] = {}  # request number (0-based) -> error

    # -- mutations --------------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def create(self, name: str, *, labels: dict[str, str] | None = None, **data: str) -> Obj:
        key = f"{self.namespace}/{name}"
        assert key not in self.objects, key
        obj: Obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "uid": f"uid-{name}-{self.rv}",
                "resourceVersion": self._next_rv(),
                "labels": dict(labels or {}),
                "managedFields": [{"manager": "test", "operation": "Update"}],
            },
            "data": dict(data),
        }
        self.objects[key] = obj
        self._emit("ADDED", obj)
        return copy.deepcopy(obj)

    def update(self, name: str, *, labels: dict[str, str] | None = None, **data: str) -> Obj:
        obj = self.objects[f"{self.namespace}/{name}"]
        obj["data"].update(data)
        if labels is not None:
            obj["metadata"]["labels"] = dict(labels)
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._emit("MODIFIED", obj)
        return copy.deepcopy(obj)

    def delete(self, name: str) -> None:
        obj = self.objects.pop(f"{self.namespace}/{name}")
        obj["metadata"]["resourceVersion"] = self._next_rv()
        self._emit("DELETED", obj)

    def _emit(self, etype: str, obj: Obj) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        snapshot = copy.deepcopy(obj)
        self.history.append((rv, etype, snapshot))
        for stream in self.streams:
            stream.queue.put_nowait(WatchEvent(etype, copy.deepcopy(snapshot)))

    def compact(self) -> None:
        """Forget all history: watches from before now get 410 Gone."""
        self.compacted = self.rv
        self.history.clear()

    # -- faults -----------------------------------------------------------------------------------

    def break_streams(self, exc: Exception | None = None) -> None:
        for stream in list(self.streams):
            stream.queue.put_nowait(exc or ApiConnectionError("connection reset by fake server"))

    def end_streams(self) -> None:
        """Close open watches normally (as the server's timeoutSeconds does)."""
        for stream in list(self.streams):
            stream.queue.put_nowait(_END)

    def freeze_streams(self) -> None:
        for stream in self.streams:
            stream.frozen = True

    def bookmark(self) -> None:
        for stream in self.streams:
            stream.queue.put_nowait(WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": str(self.rv)}}))

    def go_down(self) -> None:
        self.down = True
        self.break_streams()

    def _request(self, what: str) -> None:
        self.requests.append(what)
        failure = self.fail_at.pop(len(self.requests) - 1, None)
        if failure is not None:
            raise failure
        if self.down:
            raise ApiConnectionError("cannot connect to fake API server: connection refused")
        if self.errors:
            raise self.errors.pop(0)

    def count(self, what: str) -> int:
        return self.requests.count(what)

    # -- list / watch -----------------------------------------------------------------------------

    def snapshot(self) -> list[Obj]:
        return [copy.deepcopy(self.objects[k]) for k in sorted(self.objects)]

    def list(
        self, *, limit: int | None, continue_: str | None, resource_version: str | None
    ) -> ObjectList[Obj]:
        self._request("list")
        if resource_version not in (None, "", "0") and int(resource_version) > self.rv:
            raise too_large_rv_error()
        if continue_:
            offset_text, rv_text = continue_.split(":")
            offset, snap_rv = int(offset_text), int(rv_text)
            if snap_rv < self.compacted:
                raise Expired("The provided continue parameter is too old", code=410, reason="Expired")
        else:
            offset, snap_rv = 0, self.rv
        # Snapshot semantics are approximated by the current state: good enough for the watcher,
        # which only needs one consistent pass when nothing changes meanwhile.
        items = self.snapshot()
        if limit is None:
            page, token = items[offset:], None
        else:
            page = items[offset : offset + limit]
            token = f"{offset + limit}:{snap_rv}" if offset + limit < len(items) else None
        for item in page:  # lists of built-in kinds omit these
            item.pop("apiVersion", None)
            item.pop("kind", None)
            item["apiVersion"], item["kind"] = "v1", "ConfigMap"
        return ObjectList(items=page, resource_version=str(snap_rv), continue_=token)

    async def watch(
        self, *, resource_version: str | None, send_initial_events: bool
    ) -> AsyncIterator[WatchEvent[Obj]]:
        self._request("stream-list" if send_initial_events else "watch")
        if send_initial_events and not self.streaming:
            raise BadRequest(
                "sendInitialEvents is forbidden for watch unless the WatchList feature is enabled"
            )
        stream = FakeStream(self)
        start: int
        if send_initial_events:
            for obj in self.snapshot():
                stream.queue.put_nowait(WatchEvent("ADDED", obj))
            end = {
                "kind": "ConfigMap",
                "apiVersion": "v1",
                "metadata": {
                    "resourceVersion": str(self.rv),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                },
            }
            stream.queue.put_nowait(WatchEvent("BOOKMARK", end))
        else:
            start = int(resource_version or 0)
            stream.delivered_rv = str(start)
            if start > self.rv:
                raise too_large_rv_error()
            if start < self.compacted:
                raise Expired(
                    f"too old resource version: {start} ({self.compacted})", code=410, reason="Expired"
                )
            for rv, etype, obj in self.history:
                if rv > start:
                    stream.queue.put_nowait(WatchEvent(etype, copy.deepcopy(obj)))
        self.streams.add(stream)
        try:
            while True:
                try:
                    item = await asyncio.wait_for(stream.queue.get(), self.bookmark_interval)
                except TimeoutError:
                    if not stream.delivered_rv:
                        continue
                    item = WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": stream.delivered_rv}})
                if stream.frozen:  # a frozen connection: nothing arrives any more
                    await asyncio.get_running_loop().create_future()
                if item is _END:
                    return
                if isinstance(item, Exception):
                    raise item
                if not send_initial_events or item.type != "ADDED" or stream.delivered_rv:
                    stream.delivered_rv = (
                        item.object["metadata"].get("resourceVersion") or stream.delivered_rv
                    )
                yield item
        finally:
            stream.closed = True
            self.streams.discard(stream)


class FakeListWatch:
    """A ListerWatcher over a FakeServer (records the options of each call)."""

    def __init__(self, server: FakeServer, *, probe: ServerProbe | None = None) -> None:
        self.server = server
        self.probe = probe
        self.calls: list[dict[str, Any]] = []

    @property
    def description(self) -> str:
        return "configmaps (fake)"

    async def list(
        self,
        *,
        limit: int | None,
        continue_: str | None,
        resource_version: str | None,
        resource_version_match: Any = None,
    ) -> ObjectList[Obj]:
        self.calls.append(
            {"verb": "list", "limit": limit, "continue": continue_, "resource_version": resource_version}
        )
        await asyncio.sleep(0)
        return self.server.list(limit=limit, continue_=continue_, resource_version=resource_version)

    async def watch(
        self,
        *,
        resource_version: str | None,
        timeout_seconds: int | None,
        send_initial_events: bool = False,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent[Obj]]:
        self.calls.append(
            {
                "verb": "watch",
                "resource_version": resource_version,
                "timeout_seconds": timeout_seconds,
                "send_initial_events": send_initial_events,
                "allow_bookmarks": allow_bookmarks,
            }
        )
        return self.server.watch(resource_version=resource_version, send_initial_events=send_initial_events)


class StreamingFakeListWatch(FakeListWatch):
    """Also lists in parts, one object each, as a list read while it arrives: the page's
    resourceVersion and continue token only in the last part (the layout of a server that writes
    the list's metadata after the items)."""

    async def list_stream(
        self,
        *,
        limit: int | None,
        continue_: str | None,
        resource_version: str | None,
        resource_version_match: Any = None,
    ) -> AsyncIterator[ObjectList[Obj]]:
        page = await self.list(limit=limit, continue_=continue_, resource_version=resource_version)
        for obj in page.items:
            yield ObjectList(items=[obj], resource_version="")
            await asyncio.sleep(0)
        yield ObjectList(items=[], resource_version=page.resource_version, continue_=page.continue_)


def server_probe(server: FakeServer, *, interval: float = 0.01) -> ServerProbe:
    async def check() -> bool:
        return not server.down

    return ServerProbe(check, interval=interval, spread=0.0)
