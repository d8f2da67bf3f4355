"""kopf's liveness endpoint: ``--liveness=http://0.0.0.0:8080/healthz`` answers the probe results.

A GET of the endpoint's path answers ``200`` with a JSON object of the ``@kopf.on.probe``
handlers' results by handler id (a handler that returned ``None`` is left out; no handlers:
``{}``), as kopf does. The handlers run at most once per :data:`PROBE_MAX_AGE` seconds (kopf's
fixed 10 s): queries in between get the last results, and concurrent queries share one run.
The handlers are retried as any activity (``TemporaryError(delay=)``, ``backoff=``,
``retries=``, ``timeout=``, ``errors=``); a handler that fails for good, or results that are not
JSON, answer ``500``, and the next query runs the handlers again. The server starts once the
startup handlers have finished, as kopf's does, and runs until the operator stops, leader or not.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from kubeop.kopf.activities import Activity, ActivityError, ActivityHandler, run_activity
from kubeop.manager.server import ProbeServer

__all__ = ["PROBE_MAX_AGE", "Probes", "parse_endpoint", "serve"]

PROBE_MAX_AGE = 10.0
"""Seconds during which the last probe results are served without running the handlers (kopf's)."""

log = logging.getLogger("kubeop.kopf.probing")


def parse_endpoint(endpoint: str) -> tuple[str, int, str]:
    """``http://0.0.0.0:8080/healthz`` -> ("0.0.0.0", 8080, "/healthz"); kopf's defaults for an
    absent host (localhost) or port (80); anything but ``http://`` is a ValueError naming the URL."""
    url = urlsplit(endpoint)
    if url.scheme != "http" or not url.netloc:
        raise ValueError(
            f"liveness endpoint {endpoint!r}: give http://HOST:PORT/path, e.g. http://0.0.0.0:8080/healthz"
        )
    try:
        port = url.port or 80
    except ValueError:
        raise ValueError(f"liveness endpoint {endpoint!r}: the port is not a number") from None
    return url.hostname or "localhost", port, url.path or "/"


class Probes:
    """The probe handlers' results, computed at most once per ``max_age`` seconds."""

    def __init__(
        self,
        handlers: list[ActivityHandler],
        kwargs: Callable[[], Mapping[str, Any]],
        *,
        max_age: float = PROBE_MAX_AGE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.handlers = handlers
        self.kwargs = kwargs
        self.max_age = max_age
        self.clock = clock
        self.runs = 0
        self._results: dict[str, Any] = {}
        self._taken: float | None = None
        self._lock = asyncio.Lock()

    def _fresh(self) -> bool:
        return self._taken is not None and self.clock() - self._taken < self.max_age

    async def results(self) -> dict[str, Any]:
        """The handlers' results by id (``None`` results left out); raises ActivityError."""
        if not self._fresh():
            async with self._lock:
                if not self._fresh():
                    probe_log = logging.getLogger("kubeop.kopf.activities.probe")
                    found = await run_activity(
                        self.handlers,
                        Activity.PROBE,
                        logger=probe_log,
                        kwargs=dict(self.kwargs(), logger=probe_log),
                    )
                    self.runs += 1
                    self._results = {hid: result for hid, result in found.items() if result is not None}
                    self._taken = self.clock()
        return dict(self._results)

    async def answer(self) -> tuple[int, bytes, str]:
        """The HTTP answer: 200 and the results as JSON, or 500 naming what failed."""
        try:
            body = json.dumps(await self.results()).encode()
        except ActivityError as exc:
            log.warning("liveness probe failed: %s", exc)
            return 500, f"500: {exc}\n".encode(), "text/plain; charset=utf-8"
        except (TypeError, ValueError) as exc:
            log.warning("liveness probe results are not JSON: %s", exc)
            return 500, f"500: probe results are not JSON: {exc}\n".encode(), "text/plain; charset=utf-8"
        return 200, body, "application/json; charset=utf-8"


async def serve(endpoint: str, probes: Probes) -> ProbeServer:
    """Start the liveness server at ``endpoint`` (``await server.stop()`` ends it)."""
    host, port, path = parse_endpoint(endpoint)
    server = ProbeServer(f"{host}:{port}")
    server.routes[path] = probes.answer
    await server.start()
    log.debug("Serving health status at http://%s:%s%s", host, server.port, path)
    return server
