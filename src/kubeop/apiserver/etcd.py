"""EtcdStorage: the :class:`~kubeop.apiserver.storage.Storage` kept in etcd v3, so several replicas
of one server serve one consistent API (what k8s.io/apiserver itself does).

Each object is one key ``<prefix><group>/<plural>/<namespace>/<name>`` holding its JSON without
``resourceVersion``; the version is etcd's: an object's is its key's ``mod_revision``, a list's
and a bookmark's the revision etcd answered at. Writes are transactions comparing the key's
revision (create: the key does not exist; update with a version and delete: it has not moved),
so two replicas writing the same object see a 409, never a lost update. Lists read one revision
(continue tokens name it, so every page comes from the first page's snapshot); watches are etcd
watches from the revision after the one asked for, with the previous value of each key, so a
change that makes an object leave the selectors is a DELETED. Once etcd has compacted a
revision, a list or watch at it is 410 Expired and the client relists. Watches ask for etcd's
progress notifications; one that hears nothing for ``watch_idle_timeout`` (11 min by default:
longer than etcd's 10 min notification interval) is a half-open connection and ends with a 504
the client sees, never hangs while bookmarks repeat an old version.

etcd is reached through its JSON gateway (``/v3/kv/...``, ``/v3/watch``) over aiohttp: no gRPC
stack, every answer parsed strictly, each response bounded in size and time. Objects are listed
in etcd's key order (as kube-apiserver lists them), read in ranges of at most 100 keys at
the list's revision however large its ``limit``: a page gathers its items from as many ranges as
it takes.

etcd compacts itself (``--auto-compaction-retention``; kube-apiserver also compacts the etcd it
uses every five minutes). ``history`` makes this storage compact its etcd too, keeping between
``history`` and twice ``history`` revisions (a compaction every ``history`` writes, after the write
is stored; one that fails is logged and retried after a later write): only for an etcd of its own.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import ssl
from collections.abc import AsyncGenerator
from typing import Any

import aiohttp
import orjson

from kubeop.apiserver._watchqueue import WatchQueue
from kubeop.apiserver.memory import (
    _INITIAL_EVENTS_END,
    _Change,
    _conflict,
    _decode_continue,
    _encode_continue,
    _event_for,
    _expired,
    _not_found,
    _selected,
)
from kubeop.apiserver.status import StatusError
from kubeop.apiserver.storage import ListOptions, ListPage, StorageEvent, WatchOptions
from kubeop.core.model import copy_json

__all__ = ["EtcdStorage"]

log = logging.getLogger("kubeop.apiserver")

_MAX_RESPONSE = 64 << 20  # an answer's cap: a range of large objects is read again in smaller ranges
_MAX_LINE = 8 << 20  # one watch response: an event with the value and the previous value
_CHUNK = 100
_DELETE_RETRIES = 5


class _TooLarge(StatusError):
    """etcd's answer is over _MAX_RESPONSE bytes."""


class EtcdStorage:
    """Objects in etcd v3 at ``url`` (``http://host:2379``; ``https://`` with ``tls``, a context
    holding the client certificate), under ``prefix``; see the module docstring."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "/kubeop/apiserver/",
        history: int | None = None,
        watch_queue: int = 1_000,
        timeout: float = 10.0,
        tls: ssl.SSLContext | None = None,
        watch_idle_timeout: float = 660.0,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"EtcdStorage: url must be http(s)://host:port, got {url!r}")
        if not prefix.startswith("/") or not prefix.endswith("/"):
            raise ValueError(f"EtcdStorage: prefix must start and end with '/', got {prefix!r}")
        if (history is not None and history < 1) or watch_queue < 1 or timeout <= 0:
            raise ValueError(
                "EtcdStorage: history and watch_queue must be >= 1 and timeout > 0, got "
                f"{history}, {watch_queue}, {timeout}"
            )
        if watch_idle_timeout <= 0:
            raise ValueError(
                "EtcdStorage: watch_idle_timeout must be > 0 (longer than etcd's "
                f"--experimental-watch-progress-notify-interval, 10 min by default), got {watch_idle_timeout}"
            )
        self.url = url.rstrip("/")
        self.prefix = prefix
        self._history = history
        self._watch_queue = watch_queue
        self._timeout = timeout
        self._watch_idle = watch_idle_timeout
        self._tls = tls
        self._session: aiohttp.ClientSession | None = None
        self._revision = 0  # the latest revision etcd answered at
        self._compacted = 0  # the revision this storage last compacted to
        self._compacting = False  # a write's compaction is under way (the others skip theirs)
        self._watchers: set[_Watcher] = set()
        self._closed = False

    def __repr__(self) -> str:
        return f"<EtcdStorage {self.url}{self.prefix} at version {self._revision}>"

    @property
    def resource_version(self) -> int:
        """The latest etcd revision this storage has seen (its writes', reads' and watches')."""
        return self._revision

    async def compact(self, revision: int | None = None) -> int:
        """Compact etcd's history up to ``revision`` (default: the latest): lists, continue tokens
        and watches at older versions become 410. Compaction is etcd-wide. Returns the revision."""
        if revision is None:
            revision = int((await self._call("/v3/kv/range", {"key": _b64(b"\0"), "count_only": True}))[1])
        return await self._compact(revision)

    async def _compact(self, revision: int) -> int:
        try:
            await self._call("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        except StatusError as exc:
            if exc.code != 410:  # already compacted past it
                raise
        self._compacted = max(self._compacted, revision)
        return revision

    # -- reads ---------------------------------------------------------------------------------

    async def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        """The object ``namespace/name``; StatusError 404 when there is none."""
        reply, _ = await self._call("/v3/kv/range", {"key": _b64(self._key(resource, namespace, name))})
        kvs = _kvs(reply)
        if not kvs:
            raise _not_found(resource, name)
        return _object(kvs[0])

    async def list(self, resource: str, options: ListOptions) -> ListPage:
        """One page of the objects matching ``options``, read at one etcd revision."""
        base = self._key(resource, options.namespace or None)
        start, end, revision = base, _prefix_end(base), 0
        if options.continue_token:
            revision, (namespace, name) = _decode_continue(options.continue_token)
            start = self._key(resource, namespace, name) + b"\0"
            if not start.startswith(base):
                raise StatusError(400, "continue: the token is for another list; start the list again")
        elif options.resource_version is not None and options.exact:
            revision = options.resource_version
        items: list[dict[str, Any]] = []
        chunk = _CHUNK
        while True:  # range after range of at most _CHUNK keys, whatever the limit: bounded answers
            body = {"key": _b64(start), "range_end": _b64(end), "limit": str(chunk)}
            if revision:
                body["revision"] = str(revision)
            try:
                reply, at = await self._call("/v3/kv/range", body)
            except _TooLarge:
                if chunk == 1:  # one object over the cap: etcd's own limit is far below it
                    raise
                chunk = max(1, chunk // 4)  # large objects: fewer of them a range, to the end of this list
                continue
            except StatusError as exc:
                if exc.code == 504 and options.continue_token:  # no page was made at a revision to come
                    raise StatusError(
                        400, "continue: not a continue token this server made; start the list again"
                    ) from None
                raise
            if not revision:
                revision = at
                if options.resource_version is not None and options.resource_version > at:
                    raise StatusError(
                        504,
                        f"Too large resource version: {options.resource_version}, current: {at}",
                        reason="Timeout",
                    )
            kvs = _kvs(reply)
            for kv in kvs:
                obj = _object(kv)
                if not _selected(obj, options.labels, options.fields):
                    continue
                if options.limit and len(items) == options.limit:
                    token = _encode_continue(revision, items[-1])
                    remaining = None
                    if options.labels.is_empty and options.fields.is_empty:
                        counted, _ = await self._call(
                            "/v3/kv/range",
                            {
                                "key": kv["key"],
                                "range_end": _b64(end),
                                "revision": str(revision),
                                "count_only": True,
                            },
                        )
                        remaining = _int(counted.get("count", "0"), "count")
                    return ListPage(items, revision, token, remaining)
                items.append(obj)
            if not reply.get("more") or not kvs:
                return ListPage(items, revision)
            start = _unb64(kvs[-1]["key"]) + b"\0"

    # -- writes --------------------------------------------------------------------------------

    async def create(self, resource: str, namespace: str, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new object (if its key does not exist); StatusError 409 AlreadyExists if it does."""
        key = _b64(self._key(resource, namespace, name))
        compare = {"key": key, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
        ok, _, revision = await self._txn(compare, key, obj)
        if not ok:
            group, _, plural = resource.partition("/")
            raise StatusError(
                409,
                f'{plural}.{group} "{name}" already exists',
                reason="AlreadyExists",
                group=group,
                name=name,
            )
        return _versioned(obj, revision)

    async def update(
        self, resource: str, namespace: str, name: str, obj: dict[str, Any], *, resource_version: int | None
    ) -> dict[str, Any]:
        """Replace the object if it exists (and, with ``resource_version``, has not moved on)."""
        key = _b64(self._key(resource, namespace, name))
        if resource_version is None:
            compare = {"key": key, "target": "VERSION", "result": "GREATER", "version": "0"}
        else:
            compare = {"key": key, "target": "MOD", "result": "EQUAL", "mod_revision": str(resource_version)}
        ok, found, revision = await self._txn(compare, key, obj)
        if not ok:
            raise _conflict(resource, name) if found else _not_found(resource, name)
        return _versioned(obj, revision)

    async def delete(
        self,
        resource: str,
        namespace: str,
        name: str,
        *,
        resource_version: int | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        """Remove the object, returning its last state at the deletion's version; 404 if gone,
        409 on a precondition (checked against the value deleted: a delete racing a write retries)."""
        raw = self._key(resource, namespace, name)
        key = _b64(raw)
        for _ in range(_DELETE_RETRIES):
            reply, _ = await self._call("/v3/kv/range", {"key": key})
            kvs = _kvs(reply)
            if not kvs:
                raise _not_found(resource, name)
            old = _object(kvs[0])
            if (resource_version is not None and resource_version != _revision_of(kvs[0])) or (
                uid is not None and uid != old.get("metadata", {}).get("uid")
            ):
                raise _conflict(resource, name)
            compare = {"key": key, "target": "MOD", "result": "EQUAL", "mod_revision": kvs[0]["mod_revision"]}
            done, at = await self._call(
                "/v3/kv/txn", {"compare": [compare], "success": [{"request_delete_range": {"key": key}}]}
            )
            if done.get("succeeded") is True:
                await self._compact_history(at)
                return _versioned(old, at)
        raise _conflict(resource, name)

    async def _txn(self, compare: dict[str, str], key: str, obj: dict[str, Any]) -> tuple[bool, bool, int]:
        """Put ``obj`` at ``key`` if ``compare`` holds: (done, whether the key exists, revision)."""
        value = dict(obj)
        value["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
        put = {"request_put": {"key": key, "value": _b64(orjson.dumps(value))}}
        reply, revision = await self._call(
            "/v3/kv/txn",
            {
                "compare": [compare],
                "success": [put],
                "failure": [{"request_range": {"key": key, "count_only": True}}],
            },
        )
        if reply.get("succeeded") is True:
            await self._compact_history(revision)
            return True, True, revision
        responses = reply.get("responses")
        found = False
        if isinstance(responses, list) and responses and isinstance(responses[0], dict):
            counted = responses[0].get("response_range") or {}
            found = isinstance(counted, dict) and _int(counted.get("count", "0"), "count") > 0
        return False, found, revision

    async def _compact_history(self, revision: int) -> None:
        """After a stored write at ``revision``: with ``history``, compact once ``history`` more
        revisions than the last compaction kept can go (one compaction per ``history`` writes, not
        one per write). The write is stored: a compaction that fails is logged, retried later."""
        history = self._history
        if history is None or self._compacting:
            return
        keep_from = revision - history
        if keep_from - self._compacted < history:
            return
        self._compacting = True
        try:
            await self._compact(keep_from)
        except StatusError as exc:
            log.warning("etcd history not compacted to %d (retried after a later write): %s", keep_from, exc)
        finally:
            self._compacting = False

    # -- watch ---------------------------------------------------------------------------------

    def watch(self, resource: str, options: WatchOptions) -> AsyncGenerator[StorageEvent, None]:
        """The events from ``options``' version on (see :meth:`Storage.watch`), from an etcd watch."""
        return self._watch(resource, options)

    async def _watch(self, resource: str, options: WatchOptions) -> AsyncGenerator[StorageEvent, None]:
        base = self._key(resource, options.namespace or None)
        first: list[StorageEvent] = []
        start = options.resource_version
        if start is None or options.initial_events:
            try:
                page = await self.list(
                    resource,
                    ListOptions(namespace=options.namespace, labels=options.labels, fields=options.fields),
                )
            except StatusError:
                if self._closed:  # closed while the watch started: it ends, as the others
                    return
                raise
            if options.initial_events and start is not None and start > page.resource_version:
                raise StatusError(
                    504,
                    f"Too large resource version: {start}, current: {page.resource_version}",
                    reason="Timeout",
                )
            first = [StorageEvent("ADDED", obj, _version_of(obj)) for obj in page.items]
            start = page.resource_version
            if options.initial_events:
                meta = {"resourceVersion": str(start), "annotations": {_INITIAL_EVENTS_END: "true"}}
                first.append(StorageEvent("BOOKMARK", {"metadata": meta}, start))
        else:  # etcd would wait for a revision to come: the client relists instead, as from memory
            try:
                _, now = await self._call("/v3/kv/range", {"key": _b64(base), "count_only": True})
            except StatusError:
                if self._closed:
                    return
                raise
            if start > now:
                raise StatusError(
                    504, f"Too large resource version: {start}, current: {now}", reason="Timeout"
                )
        if self._closed:
            return
        watcher = _Watcher(self, resource, base, options, start, self._watch_queue)
        self._watchers.add(watcher)
        reader = asyncio.create_task(watcher.read(), name=f"etcd watch {base.decode(errors='replace')}")
        try:
            for event in first:
                yield event
            while (item := await watcher.queue.next(options, lambda: watcher.delivered)) is not None:
                yield item
        finally:
            self._watchers.discard(watcher)
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def close(self) -> None:
        """End every watch and close the connections to etcd."""
        self._closed = True
        for watcher in list(self._watchers):
            watcher.queue.end()
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- etcd ----------------------------------------------------------------------------------

    def _key(self, resource: str, namespace: str | None = None, name: str = "") -> bytes:
        """The key of one object, or (without a name) the prefix of a namespace's or a resource's."""
        if namespace is None:
            return f"{self.prefix}{resource}/".encode()
        return f"{self.prefix}{resource}/{namespace}/{name}".encode()

    def _http(self) -> aiohttp.ClientSession:
        if self._closed:
            raise StatusError(503, "the etcd storage is closed")
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._tls if self._tls is not None else True, limit=0),
                read_bufsize=_MAX_LINE // 2,  # aiohttp refuses lines past twice this
                raise_for_status=False,
            )
        return self._session

    async def _call(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """POST ``body`` to etcd's gateway: (the answer, the revision in its header)."""
        try:
            async with asyncio.timeout(self._timeout):
                async with self._http().post(self.url + path, data=orjson.dumps(body)) as resp:
                    if resp.content_length is not None and resp.content_length > _MAX_RESPONSE:
                        size = resp.content_length
                        raise _TooLarge(500, f"etcd answered {size} bytes to {path}: too large")
                    data = await _read(resp, path)
                    status = resp.status
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise StatusError(
                503, f"etcd at {self.url} did not answer {path}: {exc or type(exc).__name__}"
            ) from None
        reply = _json(data, path)
        if status != 200:
            raise _etcd_error(reply, path)
        return reply, self._seen(reply.get("header"), path)

    def _seen(self, header: Any, path: str) -> int:
        if not isinstance(header, dict):
            raise StatusError(500, f"etcd's answer to {path} has no header")
        revision = _int(header.get("revision", "0"), "header.revision")
        self._revision = max(self._revision, revision)
        return revision


class _Watcher:
    """One etcd watch feeding one storage watch: a task reads etcd's stream into a bounded queue;
    a watcher that falls ``size`` events behind is ended (it resumes from its last version)."""

    def __init__(
        self, storage: EtcdStorage, resource: str, base: bytes, options: WatchOptions, start: int, size: int
    ) -> None:
        self.storage, self.resource, self.base, self.options = storage, resource, base, options
        self.start = start
        self.delivered = start  # every change up to this revision was queued
        self.queue = WatchQueue(size)

    async def read(self) -> None:
        storage = self.storage
        body = {
            "create_request": {
                "key": _b64(self.base),
                "range_end": _b64(_prefix_end(self.base)),
                "start_revision": str(self.start + 1),
                "prev_kv": True,
                "progress_notify": True,
            }
        }
        try:
            timeout = aiohttp.ClientTimeout(total=None, connect=storage._timeout)
            async with storage._http().post(
                storage.url + "/v3/watch", data=orjson.dumps(body), timeout=timeout
            ) as resp:
                if resp.status != 200:
                    data = await _read(resp, "/v3/watch")
                    self.queue.put(_etcd_error(_json(data, "/v3/watch"), "/v3/watch"))
                    return
                while not self.queue.ended:
                    try:
                        async with asyncio.timeout(storage._watch_idle):
                            line = await resp.content.readline()
                    except TimeoutError:  # a half-open connection: not even a progress notification
                        raise StatusError(
                            504,
                            f"etcd's watch at {storage.url} sent nothing for {storage._watch_idle:.0f} s "
                            "(it sends a progress notification when quiet): ended, watch again",
                            reason="Timeout",
                        ) from None
                    if not line:
                        return
                    if line.strip():
                        self.receive(_json(line, "/v3/watch"))
        except (aiohttp.ClientError, OSError, ValueError):
            return  # the stream broke: the client resumes from its last version
        except StatusError as exc:
            self.queue.put(exc)
        finally:
            self.queue.end()

    def receive(self, message: dict[str, Any]) -> None:
        if "error" in message:
            raise _etcd_error(message["error"] if isinstance(message["error"], dict) else {}, "/v3/watch")
        result = message.get("result")
        if not isinstance(result, dict):
            raise StatusError(500, "etcd's watch sent a message without a result")
        if result.get("canceled"):
            compacted = result.get("compact_revision")
            if compacted is not None and _int(compacted, "compact_revision") > 0:
                raise _expired(self.start)
            self.queue.end()
            return
        revision = self.storage._seen(result.get("header"), "/v3/watch")
        events = result.get("events") or []
        if not isinstance(events, list):
            raise StatusError(500, "etcd's watch sent events that are not a list")
        for raw in events:
            change = self._change(raw)
            event = _event_for(change, None, self.options.labels, self.options.fields)
            self.delivered = change.resource_version
            if event is not None:
                self.queue.put(event)
        if not events and not result.get("created"):  # a progress notification: nothing before it is pending
            self.delivered = max(self.delivered, revision)

    def _change(self, raw: Any) -> _Change:
        if not isinstance(raw, dict) or not isinstance(raw.get("kv"), dict):
            raise StatusError(500, "etcd's watch sent an event without a kv")
        kind = raw.get("type", "PUT")
        kv, prev = raw["kv"], raw.get("prev_kv")
        old = _object(prev) if isinstance(prev, dict) else None
        revision = _revision_of(kv)
        if kind == "PUT":
            new: dict[str, Any] | None = _object(kv)
        elif kind == "DELETE":
            new = None
        else:
            raise StatusError(500, f"etcd's watch sent an event of type {kind!r}")
        either = new if new is not None else old
        meta = (either or {}).get("metadata") or {}
        return _Change(revision, self.resource, (meta.get("namespace", ""), meta.get("name", "")), old, new)


async def _read(resp: aiohttp.ClientResponse, path: str) -> bytes:
    """The whole body, refused past _MAX_RESPONSE bytes."""
    chunks, total = [], 0
    while chunk := await resp.content.read(1 << 20):
        total += len(chunk)
        if total > _MAX_RESPONSE:
            raise _TooLarge(500, f"etcd's answer to {path} is over {_MAX_RESPONSE} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise StatusError(500, "etcd sent a key or value that is not base64 text")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise StatusError(500, "etcd sent a key or value that is not base64") from None


def _prefix_end(prefix: bytes) -> bytes:
    """The first key after every key starting with ``prefix`` (etcd's range_end for a prefix)."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


def _json(data: bytes, path: str) -> dict[str, Any]:
    try:
        reply = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise StatusError(500, f"etcd's answer to {path} is not JSON") from None
    if not isinstance(reply, dict):
        raise StatusError(500, f"etcd's answer to {path} is not a JSON object")
    return reply


def _int(value: Any, what: str) -> int:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise StatusError(500, f"etcd sent {what} {value!r}, not a non-negative integer")


def _kvs(reply: dict[str, Any]) -> list[dict[str, Any]]:
    kvs = reply.get("kvs") or []
    if not isinstance(kvs, list) or not all(isinstance(kv, dict) for kv in kvs):
        raise StatusError(500, "etcd's range answer has kvs that are not a list of objects")
    return kvs


def _revision_of(kv: dict[str, Any]) -> int:
    return _int(kv.get("mod_revision"), "mod_revision")


def _object(kv: dict[str, Any]) -> dict[str, Any]:
    """The stored object of ``kv`` with its ``resourceVersion`` (the key's mod revision)."""
    try:
        obj = orjson.loads(_unb64(kv.get("value", "")))
    except orjson.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        key = _unb64(kv.get("key", "")).decode(errors="replace")
        raise StatusError(500, f"etcd key {key!r} does not hold an object this storage wrote")
    obj["metadata"]["resourceVersion"] = str(_revision_of(kv))
    return obj


def _versioned(obj: dict[str, Any], revision: int) -> dict[str, Any]:
    answer: dict[str, Any] = copy_json(obj)
    answer.setdefault("metadata", {})["resourceVersion"] = str(revision)
    return answer


def _version_of(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def _etcd_error(reply: dict[str, Any], path: str) -> StatusError:
    message = str(reply.get("message") or reply.get("error") or "no message")[:500]
    if "required revision has been compacted" in message:
        return StatusError(
            410,
            "too old resource version: etcd has compacted the changes before it; list again",
            reason="Expired",
        )
    if "future revision" in message:
        return StatusError(504, f"Too large resource version: {message}", reason="Timeout")
    if "request is too large" in message or "message larger than max" in message:
        return StatusError(413, "the object is larger than etcd takes (its --max-request-bytes)")
    return StatusError(500, f"etcd refused {path}: {message}")
