"""Webhooks: the admission webhooks and conversions one server answers, by path.

:meth:`Webhooks.handle` turns (path, query, body) into (HTTP status, body) with no I/O of its own,
so everything the server answers is testable without TLS or sockets.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson

from kubeop.webhook.admission import AdmissionWebhook
from kubeop.webhook.conversion import Conversion
from kubeop.webhook.review import BadReview, decode_admission, decode_conversion

__all__ = ["Webhooks", "parse_timeout"]

log = logging.getLogger("kubeop.webhook")

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_timeout(value: str | None) -> float | None:
    """The API server's ``?timeout=`` (a Go duration such as ``10s`` or ``1m30s``) in seconds."""
    if not value or not _DURATION.match(value):
        return None
    return sum(float(n) * _UNITS[u] for n, u in _PART.findall(value))


class Webhooks:
    """A set of admission webhooks and conversions with distinct paths."""

    def __init__(self, items: Iterable[AdmissionWebhook | Conversion] = ()) -> None:
        self._admission: dict[str, AdmissionWebhook] = {}
        self._conversion: dict[str, Conversion] = {}
        for item in items:
            self.add(item)

    def add(self, item: AdmissionWebhook | Conversion) -> None:
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
        return list(self._admission.values())

    @property
    def conversions(self) -> list[Conversion]:
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
        try:
            if webhook is not None:
                return 200, await webhook.review(decode_admission(body, headers=headers, peer=peer), timeout)
            assert conversion is not None
            return 200, conversion.review(decode_conversion(body))
        except BadReview as exc:
            log.warning("webhook %s: bad review: %s", path, exc)
            return 400, orjson.dumps({"message": str(exc)})
