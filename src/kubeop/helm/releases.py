"""Helm's release storage, read from the shared cache: which revisions of a release exist.

Helm (v3, Secret driver) stores each revision of a release as a Secret named
``sh.helm.release.v1.<name>.v<revision>`` in the release's namespace, labelled ``owner=helm``,
``name=<release>``, ``status=<status>`` and ``version=<revision>``; its ``release`` key holds the
release as gzipped JSON, base64-encoded once more by Helm. Every write goes through the helm
binary; this module only reads, from one informer over ``owner=helm`` Secrets, so that deciding
whether a release needs work costs no helm process and no API request. Decoded releases are
memoised by the Secret's uid and resourceVersion.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubeop.cache import DeletedFinalStateUnknown, FuncHandler, Informer, SharedInformerFactory
from kubeop.core.resource import ApiResource

__all__ = [
    "RELEASE_SECRETS",
    "Release",
    "ReleaseStore",
    "decode_release",
    "release_from_json",
    "release_from_secret",
]

RELEASE_SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
HELM_OWNER_SELECTOR = "owner=helm"
_GZIP_MAGIC = b"\x1f\x8b\x08"
_INDEX = "helm-release"


@dataclass(frozen=True)
class Release:
    """One revision of a Helm release (the fields the operator uses)."""

    name: str
    namespace: str
    version: int
    status: str
    manifest: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)
    notes: str = ""
    description: str = ""
    chart: str = ""
    chart_version: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    """The release's labels: its storage Secret's, Helm's own included (``name``, ``owner``,
    ``status``, ``version``) and those given with ``--labels``. A release read from ``helm ...
    -o json`` has none: Helm keeps labels out of the release document."""

    @property
    def deployed(self) -> bool:
        """Whether this revision is the deployed one (status ``deployed``)."""
        return self.status == "deployed"

    @property
    def pending(self) -> bool:
        """An operation on it was started and never finished (pending-install/-upgrade/-rollback)."""
        return self.status.startswith("pending")


def decode_release(encoded: str | bytes) -> dict[str, Any]:
    """Helm's storage encoding (base64 of gzipped JSON) to the release document."""
    raw = base64.b64decode(encoded)
    if raw.startswith(_GZIP_MAGIC):
        raw = gzip.decompress(raw)
    doc = json.loads(raw)
    if not isinstance(doc, dict):
        raise ValueError("a Helm release is a JSON object")
    return doc


def release_from_json(doc: Mapping[str, Any]) -> Release:
    """A :class:`Release` from a release document (storage, or ``helm ... -o json`` output)."""
    info = doc.get("info") or {}
    chart_md = (doc.get("chart") or {}).get("metadata") or {}
    return Release(
        name=str(doc.get("name") or ""),
        namespace=str(doc.get("namespace") or ""),
        version=int(doc.get("version") or 0),
        status=str(info.get("status") or ""),
        manifest=str(doc.get("manifest") or ""),
        config=doc.get("config") or {},
        notes=str(info.get("notes") or ""),
        description=str(info.get("description") or ""),
        chart=str(chart_md.get("name") or ""),
        chart_version=str(chart_md.get("version") or ""),
    )


def release_from_secret(secret: Mapping[str, Any]) -> Release:
    """Decode one storage Secret, with its labels (raises ValueError/KeyError when it is not one)."""
    data = secret.get("data") or {}
    rel = release_from_json(decode_release(base64.b64decode(data["release"])))
    labels = (secret.get("metadata") or {}).get("labels") or {}
    return replace(rel, labels={str(k): str(v) for k, v in labels.items()})


def _release_index(secret: Mapping[str, Any]) -> list[str]:
    md = secret.get("metadata") or {}
    name = (md.get("labels") or {}).get("name")
    return [f"{md.get('namespace') or ''}/{name}"] if name else []


class ReleaseStore:
    """Releases as the cache sees them; one per operator process, shared by its controllers.
    With ``namespace``, only that namespace's releases are watched.

    Create it with the manager's informer factory, then ``await start()`` (idempotent) before
    reading. Reads are synchronous and answer from the cache: right after a helm operation, wait
    with :meth:`wait_for` until the cache has seen the result before trusting them.
    """

    def __init__(self, cache: SharedInformerFactory, *, namespace: str | None = None) -> None:
        self._cache = cache
        self.namespace = namespace
        self._informer: Informer | None = None
        self._decoded: dict[tuple[str, str], Release] = {}
        self._listeners: list[Callable[[str, str, int], None]] = []
        self._changed = asyncio.Event()
        self._start_lock = asyncio.Lock()

    async def start(self, timeout: float = 120.0) -> None:
        """Start (or join) the informer over ``owner=helm`` Secrets and wait for its first list."""
        async with self._start_lock:
            if self._informer is None:
                informer = self._cache.informer(
                    RELEASE_SECRETS, namespace=self.namespace, label_selector=HELM_OWNER_SELECTOR
                )
                informer.add_indexers({_INDEX: _release_index})
                informer.add_event_handler(
                    FuncHandler(on_add=self._on_add, on_update=self._on_update, on_delete=self._on_delete)
                )
                self._informer = informer
        if not await self._informer.wait_for_sync(timeout):
            raise TimeoutError(
                f"Helm release Secrets were not listed within {timeout:.0f} s "
                "(the operator needs list/watch on secrets)"
            )

    def subscribe(self, listener: Callable[[str, str, int], None]) -> None:
        """Call ``listener(namespace, release_name, revision)`` when a revision of a release is
        added, changed (its status) or deleted after the first list."""
        self._listeners.append(listener)

    # -- reads ------------------------------------------------------------------------------------

    def history(self, namespace: str, name: str) -> list[Release]:
        """Every stored revision, oldest first (Secrets that fail to decode are skipped)."""
        if self._informer is None:
            raise RuntimeError("ReleaseStore.start() has not run")
        out = []
        for secret in self._informer.store.by_index(_INDEX, f"{namespace}/{name}"):
            rel = self._decode(secret)
            if rel is not None:
                out.append(rel)
        out.sort(key=lambda r: r.version)
        return out

    def deployed(self, namespace: str, name: str) -> Release | None:
        """The latest revision with status ``deployed``, if any."""
        for rel in reversed(self.history(namespace, name)):
            if rel.deployed:
                return rel
        return None

    def _decode(self, secret: Mapping[str, Any]) -> Release | None:
        md = secret.get("metadata") or {}
        key = (str(md.get("uid") or md.get("name")), str(md.get("resourceVersion") or ""))
        rel = self._decoded.get(key)
        if rel is None:
            try:
                rel = release_from_secret(secret)
            except (ValueError, KeyError, TypeError, OSError, EOFError):
                return None
            if len(self._decoded) > 20_000:
                self._decoded.clear()
            self._decoded[key] = rel
        return rel

    async def wait_for(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[Sequence[Release]], bool],
        timeout: float = 10.0,
    ) -> bool:
        """Wait until ``predicate(history)`` holds for what the cache shows (True), or ``timeout``
        passes (False). Used after a helm operation, so that the next read sees its result."""
        deadline = time.monotonic() + timeout
        while True:
            self._changed.clear()
            if predicate(self.history(namespace, name)):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            # Another waiter may clear the event between our check and our wait: the short
            # timeout bounds what that race can cost.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.2))

    # -- events ----------------------------------------------------------------------------------

    def _notify(self, secret: Any) -> None:
        self._changed.set()
        if isinstance(secret, DeletedFinalStateUnknown):
            secret = secret.obj
            if secret is None:
                return
        md = secret.get("metadata") or {}
        labels = md.get("labels") or {}
        name = labels.get("name")
        if not name:
            return
        version = str(labels.get("version") or "")
        for listener in self._listeners:
            listener(md.get("namespace") or "", name, int(version) if version.isdigit() else 0)

    def _on_add(self, secret: Any, is_in_initial_list: bool) -> None:
        if is_in_initial_list:
            return
        self._notify(secret)

    def _on_update(self, old: Any, new: Any) -> None:
        if old is new or (old.get("metadata") or {}).get("resourceVersion") == (
            new.get("metadata") or {}
        ).get("resourceVersion"):
            return
        self._notify(new)

    def _on_delete(self, secret: Any) -> None:
        self._notify(secret)
