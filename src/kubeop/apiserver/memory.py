"""MemoryStorage: the in-process :class:`~kubeop.apiserver.storage.Storage` (tests, computed or
throwaway resources). Nothing survives the process.

Every write appends to a history of the last ``history`` changes (old and new object), which
serves three things: watches resuming from a version (replayed from it), continue tokens (the
next page of a list is the first page's snapshot, rebuilt by undoing the changes made since) and
exact-version lists. A version older than the history is 410 Expired, as after etcd compacts.

Each watcher has a queue of at most ``watch_queue`` events; one that falls further behind is
ended (kube-apiserver ends a slow watcher too), and resumes from its last version (see
:mod:`kubeop.apiserver._watchqueue`).
"""

from __future__ import annotations

import base64
import binascii
from collections import deque
from collections.abc import AsyncGenerator, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from kubeop.apiserver._watchqueue import WatchQueue
from kubeop.apiserver.status import StatusError
from kubeop.apiserver.storage import ListOptions, ListPage, StorageEvent, WatchOptions
from kubeop.core.model import copy_json
from kubeop.core.selectors import FieldSelector, LabelSelector

__all__ = ["MemoryStorage"]

_Key = tuple[str, str]  # (namespace, name)
_INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True, slots=True)
class _Change:
    resource_version: int
    resource: str
    key: _Key
    old: dict[str, Any] | None
    new: dict[str, Any] | None


class _Watcher:
    __slots__ = ("fields", "labels", "namespace", "queue", "resource")

    def __init__(self, resource: str, options: WatchOptions, size: int) -> None:
        self.resource, self.namespace = resource, options.namespace
        self.labels, self.fields = options.labels, options.fields
        self.queue = WatchQueue(size)

    def offer(self, change: _Change) -> None:
        event = _event_for(change, self.namespace, self.labels, self.fields)
        if event is not None:
            self.queue.put(event)


class MemoryStorage:
    """Objects in dicts; see the module docstring."""

    def __init__(self, *, history: int = 10_000, watch_queue: int = 1_000) -> None:
        if history < 1 or watch_queue < 1:
            raise ValueError(
                f"MemoryStorage: history and watch_queue must be >= 1, got {history}, {watch_queue}"
            )
        self._objects: dict[str, dict[_Key, dict[str, Any]]] = {}
        # Versions start at 1, as etcd's revisions do: a list of an empty storage is at "1", never
        # at "0", which a watch reads as "any version" (and would then miss what came between).
        self._version = 1
        self._history: deque[_Change] = deque()
        self._history_size = history
        self._compacted = 0  # changes after this version are all in the history
        self._watchers: dict[str, set[_Watcher]] = {}
        self._watch_queue = watch_queue

    def __repr__(self) -> str:
        count = sum(len(objects) for objects in self._objects.values())
        return f"<MemoryStorage {count} objects at version {self._version}>"

    @property
    def resource_version(self) -> int:
        """The version of the latest write."""
        return self._version

    def compact(self) -> None:
        """Forget the whole history (as etcd's compaction does): older versions become 410."""
        self._history.clear()
        self._compacted = self._version

    # -- reads ---------------------------------------------------------------------------------

    async def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        """The object ``namespace/name`` (a copy); StatusError 404 when there is none."""
        obj = self._objects.get(resource, {}).get((namespace, name))
        if obj is None:
            raise _not_found(resource, name)
        return copy_json(obj)  # type: ignore[no-any-return]

    async def list(self, resource: str, options: ListOptions) -> ListPage:
        """One page of the objects matching ``options`` (selectors, limit, continue), at one version."""
        version, after = self._version, None
        if options.continue_token:
            version, after = _decode_continue(options.continue_token)
            if version > self._version:  # no page of this storage was made at a version to come
                raise _forged_continue()
        elif options.resource_version is not None and options.exact:
            version = options.resource_version
        if options.resource_version is not None and options.resource_version > self._version:
            raise StatusError(
                504,
                f"Too large resource version: {options.resource_version}, current: {self._version}",
                reason="Timeout",
            )
        objects = self._snapshot(resource, version)
        keys = sorted(
            k for k in objects if _in_namespace(k, options.namespace) and (after is None or k > after)
        )
        items: list[dict[str, Any]] = []
        token, remaining = None, None
        for i, key in enumerate(keys):
            obj = objects[key]
            if not _selected(obj, options.labels, options.fields):
                continue
            if options.limit and len(items) == options.limit:
                token = _encode_continue(version, items[-1])
                remaining = sum(1 for k in keys[i:] if _selected(objects[k], options.labels, options.fields))
                break
            items.append(copy_json(obj))
        return ListPage(items, version, token, remaining)

    def _snapshot(self, resource: str, version: int) -> dict[_Key, dict[str, Any]]:
        current = self._objects.get(resource, {})
        if version == self._version:
            return current
        if version < self._compacted or version > self._version:
            raise _expired(version)
        snapshot = dict(current)
        for change in reversed(self._history):
            if change.resource_version <= version:
                break
            if change.resource == resource:
                if change.old is None:
                    snapshot.pop(change.key, None)
                else:
                    snapshot[change.key] = change.old
        return snapshot

    # -- writes --------------------------------------------------------------------------------

    async def create(self, resource: str, namespace: str, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new object and return it with its resourceVersion; StatusError 409 if it exists."""
        objects = self._objects.setdefault(resource, {})
        if (namespace, name) in objects:
            group, _, plural = resource.partition("/")
            raise StatusError(
                409,
                f'{plural}.{group} "{name}" already exists',
                reason="AlreadyExists",
                group=group,
                name=name,
            )
        return self._write(resource, (namespace, name), None, obj)

    async def update(
        self, resource: str, namespace: str, name: str, obj: dict[str, Any], *, resource_version: int | None
    ) -> dict[str, Any]:
        """Replace the object; StatusError 404 if gone, 409 if ``resource_version`` is not current."""
        old = self._objects.get(resource, {}).get((namespace, name))
        if old is None:
            raise _not_found(resource, name)
        if resource_version is not None and resource_version != _version_of(old):
            raise _conflict(resource, name)
        return self._write(resource, (namespace, name), old, obj)

    async def delete(
        self,
        resource: str,
        namespace: str,
        name: str,
        *,
        resource_version: int | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        """Remove the object, returning its last state; StatusError 404 if gone, 409 on a precondition."""
        old = self._objects.get(resource, {}).get((namespace, name))
        if old is None:
            raise _not_found(resource, name)
        if (resource_version is not None and resource_version != _version_of(old)) or (
            uid is not None and uid != old.get("metadata", {}).get("uid")
        ):
            raise _conflict(resource, name)
        return self._write(resource, (namespace, name), old, None)

    def _write(
        self, resource: str, key: _Key, old: dict[str, Any] | None, obj: dict[str, Any] | None
    ) -> dict[str, Any]:
        version = self._version + 1
        new = None
        if obj is not None:
            new = copy_json(obj)
            new.setdefault("metadata", {})["resourceVersion"] = str(version)
        change = _Change(version, resource, key, old, new)
        self._persist(change)  # first: a write that cannot be kept changes nothing
        self._version = version
        objects = self._objects.setdefault(resource, {})
        if new is None:
            assert old is not None
            del objects[key]
            answer = copy_json(old)
            answer["metadata"]["resourceVersion"] = str(version)
        else:
            objects[key] = new
            answer = copy_json(new)
        self._history.append(change)
        while len(self._history) > self._history_size:
            self._compacted = self._history.popleft().resource_version
        for watcher in list(self._watchers.get(resource, ())):
            watcher.offer(change)
        return answer  # type: ignore[no-any-return]

    def _persist(self, change: _Change) -> None:
        """Keep ``change`` elsewhere before it is applied (a durable storage's hook; raises
        StatusError to refuse it)."""

    def _restore(
        self,
        objects: Iterable[tuple[str, _Key, dict[str, Any]]],
        history: Iterable[_Change],
        version: int,
        compacted: int,
    ) -> None:
        """Start from a saved state: the objects, the retained changes (oldest first) and the versions."""
        for resource, key, obj in objects:
            self._objects.setdefault(resource, {})[key] = obj
        self._history.extend(history)
        self._version, self._compacted = max(version, 1), compacted

    # -- watch ---------------------------------------------------------------------------------

    def watch(self, resource: str, options: WatchOptions) -> AsyncGenerator[StorageEvent, None]:
        """The events from ``options``' version on (see :meth:`Storage.watch`)."""
        return self._watch(resource, options)

    async def _watch(self, resource: str, options: WatchOptions) -> AsyncGenerator[StorageEvent, None]:
        watcher = _Watcher(resource, options, self._watch_queue)
        start = options.resource_version
        first: list[StorageEvent]
        if start is not None and start > self._version:  # not served as "now": the client relists
            raise StatusError(
                504, f"Too large resource version: {start}, current: {self._version}", reason="Timeout"
            )
        if start is None or options.initial_events:
            objects = self._objects.get(resource, {})
            first = [
                StorageEvent("ADDED", copy_json(objects[k]), _version_of(objects[k]))
                for k in sorted(objects)
                if _in_namespace(k, options.namespace)
                and _selected(objects[k], options.labels, options.fields)
            ]
        elif start < self._compacted:
            raise _expired(start)
        else:
            changes = [c for c in self._history if c.resource_version > start and c.resource == resource]
            first = [
                e
                for e in (_event_for(c, options.namespace, options.labels, options.fields) for c in changes)
                if e is not None
            ]
        if options.initial_events:
            meta = {"resourceVersion": str(self._version), "annotations": {_INITIAL_EVENTS_END: "true"}}
            first.append(StorageEvent("BOOKMARK", {"metadata": meta}, self._version))
        watchers = self._watchers.setdefault(resource, set())
        watchers.add(watcher)  # no await since the snapshot above: nothing is missed or repeated
        try:
            for event in first:
                yield event
            while (item := await watcher.queue.next(options, lambda: self._version)) is not None:
                yield item
        finally:
            watchers.discard(watcher)

    async def close(self) -> None:
        """End every watch and release what the storage holds."""
        for watchers in self._watchers.values():
            for watcher in list(watchers):
                watcher.queue.end()


def _event_for(
    change: _Change, namespace: str | None, labels: LabelSelector, fields: FieldSelector
) -> StorageEvent | None:
    if not _in_namespace(change.key, namespace):
        return None
    was = change.old is not None and _selected(change.old, labels, fields)
    now = change.new is not None and _selected(change.new, labels, fields)
    if now:
        assert change.new is not None
        return StorageEvent("MODIFIED" if was else "ADDED", copy_json(change.new), change.resource_version)
    if was:
        assert change.old is not None
        gone = copy_json(change.old)
        gone["metadata"]["resourceVersion"] = str(change.resource_version)
        return StorageEvent("DELETED", gone, change.resource_version)
    return None


def _in_namespace(key: _Key, namespace: str | None) -> bool:
    return namespace is None or key[0] == namespace


def _selected(obj: dict[str, Any], labels: LabelSelector, fields: FieldSelector) -> bool:
    meta = obj.get("metadata") or {}
    return labels.matches(meta.get("labels")) and fields.matches_object(obj)


def _version_of(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


def _encode_continue(version: int, last: dict[str, Any]) -> str:
    meta = last["metadata"]
    raw = orjson.dumps({"v": version, "ns": meta.get("namespace", ""), "name": meta["name"]})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, _Key]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        version, key = data["v"], (data["ns"], data["name"])
        if not (
            type(version) is int and version >= 0 and all(isinstance(k, str) for k in key)
        ):  # (not a bool)
            raise ValueError
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise _forged_continue() from None
    return version, key


def _forged_continue() -> StatusError:
    return StatusError(400, "continue: not a continue token this server made; start the list again")


def _not_found(resource: str, name: str) -> StatusError:
    group, _, plural = resource.partition("/")
    return StatusError(404, f'{plural}.{group} "{name}" not found', group=group, kind=plural, name=name)


def _conflict(resource: str, name: str) -> StatusError:
    group, _, plural = resource.partition("/")
    return StatusError(
        409,
        f'Operation cannot be fulfilled on {plural}.{group} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        group=group,
        kind=plural,
        name=name,
    )


def _expired(version: int) -> StatusError:
    return StatusError(
        410,
        f"too old resource version: {version}: changes before it are no longer kept; list again",
        reason="Expired",
    )
