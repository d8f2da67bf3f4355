"""EventRecorder: Kubernetes Events (events.k8s.io/v1) without event storms.

A repeated event (same object, type, reason, action and note) is not written again: it becomes a
*series* on the first Event, whose count and lastObservedTime are patched at most once per
``series_interval``. Each object may emit at most ``burst`` distinct events per ``window``;
beyond that they are dropped (and counted). Recording never blocks a reconcile and never fails
one: writes happen in background tasks, and their errors are logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeop.client import Client
from kubeop.core.model import to_dict
from kubeop.core.patch import PatchType
from kubeop.core.resource import ApiResource

__all__ = ["EventRecorder"]

log = logging.getLogger("kubeop.events")
EVENTS = ApiResource("events.k8s.io", "v1", "events", kind="Event")


def _microtime(ts: float | None = None) -> str:
    when = dt.datetime.fromtimestamp(ts if ts is not None else time.time(), dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class _Series:
    name: str
    namespace: str
    count: int = 1
    pending: int = 0
    last_flush: float = field(default_factory=time.monotonic)
    last_seen: float = field(default_factory=time.monotonic)
    flushing: bool = False


class EventRecorder:
    """Records events about objects as ``component`` (shown as the event's reporting controller)."""

    def __init__(
        self,
        client: Client | None,
        component: str,
        *,
        instance: str | None = None,
        series_interval: float = 10.0,
        burst: int = 25,
        window: float = 300.0,
    ) -> None:
        self._client = client
        self.component = component
        self.instance = instance or f"{component}-{socket.gethostname()}"
        self._series_interval = series_interval
        self._burst = burst
        self._window = window
        self._series: dict[tuple[str, str, str, str, str], _Series] = {}
        self._budget: dict[str, list[float]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing: asyncio.Event | None = None  # set by flush(): series updates go out at once
        self.dropped = 0
        self.written = 0
        self._events = 0

    def event(
        self,
        regarding: Any,
        type: str,
        reason: str,
        note: str,
        *,
        action: str | None = None,
    ) -> None:
        """Record an event about ``regarding`` (an object dict or model); returns at once.

        ``type`` is ``Normal`` or ``Warning``; ``reason`` a short CamelCase word; ``note`` what
        happened, for a person (``kubectl describe`` and ``kubectl events`` show it)::

            ctx.recorder.event(memcached, "Normal", "Scaled", f"deployment {name} scaled to {size}")
            ctx.recorder.event(memcached, "Warning", "InvalidSize", "spec.size must be at most 5")

        Repeats of the same event become one Event with a count; an object's events beyond a
        burst are dropped. Writing happens in the background and never fails a reconcile.
        """
        if self._client is None:
            return
        if type not in ("Normal", "Warning"):
            raise ValueError(f"event type must be 'Normal' or 'Warning', got {type!r}")
        obj = to_dict(regarding)
        md: Mapping[str, Any] = obj.get("metadata") or {}
        uid = md.get("uid") or f"{md.get('namespace')}/{md.get('name')}"
        action = action or reason
        key = (uid, type, reason, action, note)
        series = self._series.get(key)
        now = time.monotonic()
        self._events += 1
        if self._events % 1000 == 0:
            self._prune(now)
        if series is not None:
            series.last_seen = now
            series.count += 1
            series.pending += 1
            if not series.flushing:
                series.flushing = True
                delay = max(0.0, self._series_interval - (now - series.last_flush))
                self._spawn(self._flush_series(key, series, delay))
            return
        stamps = [t for t in self._budget.get(uid, []) if now - t < self._window]
        if len(stamps) >= self._burst:
            self.dropped += 1
            return
        stamps.append(now)
        self._budget[uid] = stamps
        namespace = md.get("namespace") or "default"
        name = f"{md.get('name')}.{os.urandom(8).hex()}"
        self._series[key] = _Series(name, namespace)
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": _microtime(),
            "reportingController": self.component,
            "reportingInstance": self.instance[:128],
            "action": action[:128],
            "reason": reason[:128],
            "note": note[:1024],
            "type": type,
            "regarding": {
                k: v
                for k, v in (
                    ("apiVersion", obj.get("apiVersion")),
                    ("kind", obj.get("kind")),
                    ("name", md.get("name")),
                    ("namespace", md.get("namespace")),
                    ("uid", md.get("uid")),
                    ("resourceVersion", md.get("resourceVersion")),
                )
                if v
            },
        }
        self._spawn(self._create(body))

    @property
    def tracked(self) -> dict[str, int]:
        """Sizes of the recorder's bookkeeping (exported as gauges): event series it may still
        aggregate into, objects with an event budget, and event writes in flight."""
        return {"series": len(self._series), "budgets": len(self._budget), "pending": len(self._tasks)}

    def _prune(self, now: float) -> None:
        """Forget series and budgets older than the window, so a long-running operator that
        sees many short-lived objects does not keep them all."""
        for key in [
            k for k, v in self._series.items() if now - v.last_seen > self._window and not v.flushing
        ]:
            del self._series[key]
        for uid in [u for u, stamps in self._budget.items() if not stamps or now - stamps[-1] > self._window]:
            del self._budget[uid]

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _create(self, body: dict[str, Any]) -> None:
        assert self._client is not None
        try:
            await self._client.create(body, resource=EVENTS)
            self.written += 1
        except Exception as exc:  # an event must never break the controller
            log.warning("could not record event %s: %s", body.get("reason"), exc)

    async def _flush_series(self, key: tuple[str, str, str, str, str], series: _Series, delay: float) -> None:
        assert self._client is not None
        try:
            if delay:
                if self._closing is None:
                    self._closing = asyncio.Event()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), delay)
            series.pending = 0
            series.last_flush = time.monotonic()
            await self._client.patch(
                EVENTS,
                series.name,
                {"series": {"count": series.count, "lastObservedTime": _microtime()}},
                namespace=series.namespace,
                type=PatchType.MERGE,
            )
            self.written += 1
        except Exception as exc:
            log.warning("could not update event series %s: %s", series.name, exc)
        finally:
            series.flushing = False

    async def flush(self) -> None:
        """Wait for pending event writes (at shutdown); series updates waiting out their
        aggregation interval are sent at once."""
        if self._closing is None:
            self._closing = asyncio.Event()
        self._closing.set()
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
