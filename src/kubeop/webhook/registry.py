"""Webhooks: the admission webhooks and conversions one server answers, by path.

:meth:`Webhooks.handle` turns (path, query, body) into (HTTP status, body) with no I/O of its own,
so everything the server answers is testable without TLS or sockets. Whatever the body, it ends
in a response: a review's verdict (a denial or a failed conversion for its uid when the review
decoded), else 400 with a message; never an exception into the server.

:meth:`Webhooks.observe` exports ``kubeop_webhook_stuck_calls{webhook=<path>}``: the calls of
each webhook's synchronous handler (or conversion) still running past their deadline; and
controller-runtime's ``controller_runtime_webhook_*`` series (:mod:`kubeop.webhook.metrics`).
:meth:`Webhooks.add_listener` tells a :class:`RequestListener` (the dashboard's) of each request
answered, with whether the admission review was denied; without listeners nothing is looked at.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from kubeop.webhook.admission import AdmissionWebhook
from kubeop.webhook.conversion import Conversion
from kubeop.webhook.metrics import WebhookMetrics
from kubeop.webhook.review import BadReview, admission_denied, admission_response, decode_admission

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["RequestListener", "Webhooks", "parse_timeout"]

log = logging.getLogger("kubeop.webhook")

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_timeout(value: str | None) -> float | None:
    """The API server's ``?timeout=`` (a Go duration such as ``10s`` or ``1m30s``) in seconds."""
    if not value or not _DURATION.match(value):
        return None
    return sum(float(n) * _UNITS[u] for n, u in _PART.findall(value))


class RequestListener(Protocol):
    """Told of each request to a served path, on the event loop (keep it short): when it starts,
    and when it is answered with its HTTP status, the seconds it took and whether an admission
    review was denied (``allowed: false``; never for a conversion)."""

    def started(self, path: str) -> None: ...

    def finished(self, path: str, status: int, seconds: float, denied: bool) -> None: ...


class Webhooks:
    """A set of admission webhooks and conversions with distinct paths."""

    def __init__(self, items: Iterable[AdmissionWebhook | Conversion] = ()) -> None:
        self._admission: dict[str, AdmissionWebhook] = {}
        self._conversion: dict[str, Conversion] = {}
        self._observed: list[CollectorRegistry] = []
        self._metrics: list[WebhookMetrics] = []
        self._listeners: list[RequestListener] = []
        for item in items:
            self.add(item)

    def add(self, item: AdmissionWebhook | Conversion) -> None:
        """Add an admission webhook or a conversion; raises ValueError when its path or name is taken (give it
        ``path=`` or ``name=``).
        """
        path = item.path
        if path in self._admission or path in self._conversion:
            raise ValueError(f"two webhooks share the path {path}; give one of them path=")
        if isinstance(item, AdmissionWebhook):
            if any(w.name == item.name and w.mutating == item.mutating for w in self._admission.values()):
                raise ValueError(f"two webhooks are named {item.name}; give one of them name=")
            self._admission[path] = item
        else:
            self._conversion[path] = item

    @property
    def admission(self) -> list[AdmissionWebhook]:
        """The admission (validating and mutating) webhooks."""
        return list(self._admission.values())

    @property
    def conversions(self) -> list[Conversion]:
        """The conversions."""
        return list(self._conversion.values())

    def __iter__(self) -> Iterator[AdmissionWebhook | Conversion]:
        yield from self._admission.values()
        yield from self._conversion.values()

    def __len__(self) -> int:
        return len(self._admission) + len(self._conversion)

    async def handle(
        self,
        path: str,
        body: bytes,
        timeout: float | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        peer: Mapping[str, Any] | None = None,
    ) -> tuple[int, bytes]:
        """(status, JSON body) for a POST of ``body`` to ``path``; ``headers`` and ``peer`` (the
        caller's certificate) reach admission handlers as the request's ``headers``/``peer``."""
        webhook = self._admission.get(path)
        conversion = self._conversion.get(path) if webhook is None else None
        if webhook is None and conversion is None:
            return 404, b'{"message": "no webhook is served at this path"}'
        if not self._metrics and not self._listeners:
            return await self._answer(path, webhook, conversion, body, timeout, headers, peer)
        for metrics in self._metrics:
            metrics.started(path)
        for listener in self._listeners:
            listener.started(path)
        start, status, payload = time.perf_counter(), 500, b""
        try:
            status, payload = await self._answer(path, webhook, conversion, body, timeout, headers, peer)
            return status, payload
        finally:
            elapsed = time.perf_counter() - start
            for metrics in self._metrics:
                metrics.finished(path, status, elapsed)
            if self._listeners:
                denied = webhook is not None and status == 200 and admission_denied(payload)
                for listener in self._listeners:
                    listener.finished(path, status, elapsed, denied)

    def add_listener(self, listener: RequestListener) -> None:
        """Tell ``listener`` of every request answered from now on (see :class:`RequestListener`)."""
        if not any(seen is listener for seen in self._listeners):
            self._listeners.append(listener)

    def remove_listener(self, listener: RequestListener) -> None:
        """Stop telling ``listener`` (nothing if it was not listening)."""
        self._listeners = [seen for seen in self._listeners if seen is not listener]

    async def _answer(
        self,
        path: str,
        webhook: AdmissionWebhook | None,
        conversion: Conversion | None,
        body: bytes,
        timeout: float | None,
        headers: Mapping[str, str] | None,
        peer: Mapping[str, Any] | None,
    ) -> tuple[int, bytes]:
        try:
            if webhook is None:
                assert conversion is not None
                return 200, await conversion.serve(body, timeout)  # decoded off the event loop
            request = decode_admission(body, headers=headers, peer=peer)
        except asyncio.CancelledError:
            if _cancelling():
                raise
            log.warning("webhook %s: the conversion raised CancelledError", path)
            return 500, b'{"message": "the conversion failed (CancelledError)"}'
        except BadReview as exc:
            log.warning("webhook %s: bad review: %s", path, exc)
            return 400, orjson.dumps({"message": str(exc)})
        except Exception as exc:
            log.warning("webhook %s: the body could not be read: %s", path, type(exc).__name__)
            return 400, orjson.dumps({"message": f"the body could not be read ({type(exc).__name__})"})
        try:
            return 200, await webhook.review(request, timeout)
        except (Exception, asyncio.CancelledError) as exc:  # review() answers every review; a subclass's
            if isinstance(exc, asyncio.CancelledError) and _cancelling():
                raise
            log.warning("webhook %s: the review failed: %s", path, type(exc).__name__)
            status = {"status": "Failure", "code": 500, "reason": "InternalError"}
            status["message"] = f"webhook {webhook.name} failed to answer: {type(exc).__name__}"
            return 200, admission_response(request.uid, allowed=False, status=status)

    def observe(self, registry: CollectorRegistry) -> None:
        """Export each webhook's stuck calls on ``registry`` (read at scrape time) and record its
        requests there with controller-runtime's names; once per registry."""
        from prometheus_client import Gauge

        if any(seen is registry for seen in self._observed):
            return
        self._observed.append(registry)
        metrics = WebhookMetrics(registry)
        self._metrics.append(metrics)
        gauge = Gauge(
            "kubeop_webhook_stuck_calls",
            "Calls of a webhook's synchronous handler or conversion still running past their "
            "deadline (each holds one of the webhook's threads until it returns)",
            ["webhook"],
            registry=registry,
        )
        for item in self:
            gauge.labels(item.path).set_function(lambda item=item: item.stuck_calls)  # type: ignore[misc]
            metrics.declare(item.path)


def _cancelling() -> bool:
    """Is the current task being cancelled (rather than handed a CancelledError by code it awaited)?"""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0
