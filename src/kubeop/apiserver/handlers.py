"""The request handlers of an aggregated API: the path parsed into what it names, the caller let
through the gate, and each verb done on the storage with Kubernetes' semantics.

Paths (everything else under the group is 404)::

    /apis/<group>/<version>/<plural>[/<name>[/status|/scale]]               cluster-scoped (and lists
    /apis/<group>/<version>/namespaces/<ns>/<plural>[/<name>[/status|/scale]]   across namespaces)
    /apis/<group>/<version>/watch/...                                       the old watch form

Verbs: get, list, watch (``?watch=true``), create (POST), update (PUT), patch (PATCH: merge, JSON
patch, server-side apply, and strategic merge for kinds that declare list types; 415 for the
others, as for a CRD), delete, deletecollection. ``dryRun=All`` on every write answers as if,
storing nothing. The server owns ``metadata.uid``, ``creationTimestamp``, ``generation`` (bumped
when anything but metadata and status changes, and when deletion starts), ``resourceVersion``
(the storage's), ``deletionTimestamp`` and ``managedFields`` (:mod:`kubeop.apiserver.apply`). A
delete of an object with finalizers sets ``deletionTimestamp`` and keeps it; the write that
removes its last finalizer deletes it; no finalizer may be added meanwhile. With a status
subresource, the main resource ignores ``status`` and ``/status`` changes only it; a kind that
declares a scale subresource answers ``/scale`` as an ``autoscaling/v1`` Scale
(:mod:`kubeop.apiserver.scale`: kubectl scale, a HorizontalPodAutoscaler). A write that
changes nothing is not written (no new resourceVersion, no event). ``Accept: ...;as=Table;g=meta.k8s.io;v=v1``
answers a Table (kubectl get), for lists, gets and watches.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote

import orjson
import yaml

from kubeop.apiserver.apply import manager_name
from kubeop.apiserver.names import check_generate_name, check_name, check_namespace
from kubeop.apiserver.patch import json_patch, merge_patch, strategic_merge_patch
from kubeop.apiserver.resource import ServedResource
from kubeop.apiserver.scale import patch_base, scale_of, scale_request, with_replicas
from kubeop.apiserver.status import StatusError
from kubeop.apiserver.storage import ListOptions, Storage, WatchOptions
from kubeop.client.httpserver import Request, Response
from kubeop.core.model import copy_json
from kubeop.core.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    validate_label_key,
    validate_label_value,
)
from kubeop.core.yaml_input import load_yaml

__all__ = ["Attributes", "Gate", "Handlers"]

JSON = "application/json"
_MERGE = "application/merge-patch+json"
_JSON_PATCH = "application/json-patch+json"
_STRATEGIC = "application/strategic-merge-patch+json"
_APPLY = "application/apply-patch+yaml"
_PATCH_RETRIES = 5
_DEFAULT_WATCH_SECONDS = 1800
_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # generateName's alphabet (no vowels, as Kubernetes)


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks, for authorization (a SubjectAccessReview's attributes). A request
    for a path that names no resource (discovery, OpenAPI) has ``resource`` empty and ``path``."""

    verb: str
    path: str
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def is_resource(self) -> bool:
        return bool(self.resource)


Gate = Callable[[Request, Attributes], Awaitable[None]]
"""Lets a request through, or raises StatusError (401, 403, 503) to refuse it."""


@dataclass(frozen=True, slots=True)
class _Target:
    served: ServedResource
    namespace: str  # "" for cluster-scoped, and for a list across namespaces
    name: str
    subresource: str
    watch: bool


class Handlers:
    """Answers the resource requests of one API group version (see the module docstring)."""

    def __init__(
        self,
        resources: Sequence[ServedResource],
        storage: Storage,
        *,
        bookmark_interval: float = 10.0,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.resources = {r.decl.plural: r for r in resources}
        self.storage = storage
        self.bookmark_interval = bookmark_interval
        self._clock = clock

    # -- parsing -----------------------------------------------------------------------------

    def attributes(
        self, request: Request, rest: list[str], group: str, version: str
    ) -> tuple[Attributes, _Target]:
        """``rest``: the path's segments after /apis/<group>/<version>."""
        query = _query(request)
        watch = query.get("watch") in ("true", "1")
        if rest and rest[0] == "watch":
            rest, watch = rest[1:], True
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace = check_namespace(rest[1], field="namespace")
            rest = rest[2:]
        if not rest or len(rest) > 3:
            raise _no_path(request.path)
        served = self.resources.get(rest[0])
        if served is None:
            raise StatusError(404, f"the server could not find the requested resource ({request.path})")
        if served.namespaced is False and namespace:
            raise _no_path(request.path)
        name = check_name(rest[1], field="name", kind=served.decl.kind) if len(rest) >= 2 else ""
        subresource = rest[2] if len(rest) == 3 else ""
        if subresource not in ("", *served.decl.subresources):
            raise _no_path(request.path)
        method = request.method
        if watch and (method != "GET" or subresource):
            raise StatusError(405, "watch is a GET of a collection or of one object")
        if subresource and method not in ("GET", "HEAD", "PUT", "PATCH"):
            raise StatusError(
                405, f"the {subresource} subresource answers get, update (PUT) and patch, not {method}"
            )
        verbs = {
            "GET": "get",
            "HEAD": "get",
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete",
        }
        verb = verbs[method]
        if not name:
            if method == "GET":
                verb = "watch" if watch else "list"
            elif method == "DELETE":
                verb = "deletecollection"
            elif method != "POST":
                raise StatusError(405, f"{method} needs an object's name in the path")
        elif method == "POST":
            raise StatusError(405, "create (POST) goes to the collection, not to an object")
        elif watch:
            verb = "watch"
        if served.namespaced and not namespace and verb not in ("list", "watch"):
            raise StatusError(
                404, f"{served.decl.plural} are namespaced: use /namespaces/<namespace>/ in the path"
            )
        attrs = Attributes(
            verb,
            request.path,
            group,
            version,
            served.decl.plural,
            subresource,
            namespace,
            name,
        )
        return attrs, _Target(served, namespace, name, subresource, watch)

    # -- the verbs ---------------------------------------------------------------------------

    async def answer(
        self,
        request: Request,
        attrs: Attributes,
        target: _Target,
        *,
        may_create: Callable[[], Awaitable[None]] | None = None,
    ) -> Response:
        """Answer ``request`` (already authorized as ``attrs``); ``may_create`` authorizes the
        create an apply makes of a missing object (kube-apiserver checks ``create`` then too):
        it raises to refuse."""
        query = _query(request)
        dry = query.get("dryRun")
        if dry not in (None, "All"):
            raise StatusError(
                400,
                f"dryRun: {dry!r} is not supported; the only value is All",
                causes=[("FieldValueNotSupported", "supported values: All", "dryRun")],
            )
        if dry is not None and _is_read(attrs.verb):
            raise StatusError(400, f"dryRun is for writes, not {attrs.verb}")
        if request.method in ("GET", "HEAD") and request.body:
            raise StatusError(400, "a GET has no body")
        verb = attrs.verb
        if target.subresource == "scale":
            return await self._scale(request, target, query, dry is not None)
        if verb == "get":
            return self._object(request, target.served, await self._get(target), 200)
        if verb == "list":
            return await self._list(request, target, query)
        if verb == "watch":
            return await self._watch(request, target, query)
        dry_run = dry is not None
        if verb == "create":
            return await self._create(request, target, query, dry_run)
        if verb == "update":
            return await self._update(request, target, query, dry_run)
        if verb == "patch":
            return await self._patch(request, target, query, dry_run, may_create)
        if verb == "delete":
            return await self._delete(request, target, dry_run)
        return await self._delete_collection(request, target, query, dry_run)

    async def _get(self, target: _Target) -> dict[str, Any]:
        return await self.storage.get(target.served.key, target.namespace, target.name)

    async def _list(self, request: Request, target: _Target, query: dict[str, str]) -> Response:
        served = target.served
        options = ListOptions(
            namespace=target.namespace if served.namespaced and target.namespace else None,
            labels=_labels(query),
            fields=self._fields(served, query),
            limit=_int(query, "limit", 0),
            continue_token=query.get("continue") or None,
            resource_version=_version(query.get("resourceVersion")),
            exact=query.get("resourceVersionMatch") == "Exact",
        )
        page = await self.storage.list(served.key, options)
        table = _table_format(request)
        metadata: dict[str, Any] = {"resourceVersion": str(page.resource_version)}
        if page.continue_token:
            metadata["continue"] = page.continue_token
            if page.remaining is not None:
                metadata["remainingItemCount"] = page.remaining
        if table:
            body = served.table(page.items, query.get("includeObject", "Metadata"))
            body["metadata"] = metadata
            return _json(200, body)
        return _json(
            200,
            {
                "apiVersion": served.decl.api_version,
                "kind": served.decl.list_kind,
                "metadata": metadata,
                "items": page.items,
            },
        )

    async def _watch(self, request: Request, target: _Target, query: dict[str, str]) -> Response:
        served = target.served
        fields = self._fields(served, query)
        if target.name:
            fields = fields & FieldSelector.from_fields({"metadata.name": target.name})
        version = _version(query.get("resourceVersion"))
        initial = query.get("sendInitialEvents") == "true"
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        if initial and (not bookmarks or query.get("resourceVersionMatch") != "NotOlderThan"):
            raise StatusError(
                422,
                "sendInitialEvents=true needs allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan",
                causes=[
                    ("FieldValueForbidden", "needs allowWatchBookmarks and NotOlderThan", "sendInitialEvents")
                ],
            )
        options = WatchOptions(
            namespace=target.namespace if served.namespaced and target.namespace else None,
            labels=_labels(query),
            fields=fields,
            resource_version=None if version == 0 else version,
            bookmarks=bookmarks,
            bookmark_interval=self.bookmark_interval,
            initial_events=initial,
        )
        seconds = _int(query, "timeoutSeconds", _DEFAULT_WATCH_SECONDS) or _DEFAULT_WATCH_SECONDS
        table = _table_format(request)
        include = query.get("includeObject", "Metadata")
        events = self.storage.watch(served.key, options)

        async def stream() -> AsyncIterator[bytes]:
            first = True
            try:
                async with asyncio.timeout(seconds):
                    async for event in events:
                        obj = event.object
                        if event.type == "BOOKMARK":
                            obj = {"kind": served.decl.kind, "apiVersion": served.decl.api_version, **obj}
                        elif table:
                            obj = served.table([obj], include, definitions=first)
                            first = False
                        yield orjson.dumps({"type": event.type, "object": obj}) + b"\n"
            except TimeoutError:
                return
            except StatusError as exc:
                yield orjson.dumps({"type": "ERROR", "object": exc.status()}) + b"\n"
            finally:
                await events.aclose()

        return Response(200, content_type=JSON, stream=stream())

    async def _create(
        self, request: Request, target: _Target, query: dict[str, str], dry_run: bool
    ) -> Response:
        if target.subresource:
            raise StatusError(405, "create goes to the collection")
        body = _body(request, JSON)
        manager = manager_name(query, request.header("user-agent"))
        stored = await self._create_object(target, body, dry_run, manager=manager)
        return self._object(request, target.served, stored, 201)

    async def _create_object(
        self, target: _Target, body: dict[str, Any], dry_run: bool, *, manager: str | None
    ) -> dict[str, Any]:
        """Create ``body`` (fields owned by ``manager``'s update; None: managedFields are set)."""
        served = target.served
        _check_type(served, body)
        meta = _metadata(body)
        name = meta.get("name") or ""
        if not name:
            prefix = meta.get("generateName")
            if not isinstance(prefix, str) or not prefix:
                raise StatusError(
                    422,
                    f"{served.decl.kind}: metadata.name or metadata.generateName is required",
                    causes=[("FieldValueRequired", "name or generateName is required", "metadata.name")],
                )
            check_generate_name(prefix, kind=served.decl.kind)
            name = prefix[:58] + "".join(secrets.choice(_SUFFIX) for _ in range(5))
        if not isinstance(name, str):
            raise StatusError(422, "metadata.name must be a string")
        meta["name"] = check_name(name, kind=served.decl.kind)
        if served.namespaced:
            if meta.get("namespace", target.namespace) != target.namespace:
                raise StatusError(
                    400,
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            meta["namespace"] = target.namespace
        else:
            meta.pop("namespace", None)
        if meta.get("resourceVersion"):
            raise StatusError(
                422,
                "metadata.resourceVersion must be empty on create (it is the server's); leave it out",
                causes=[("FieldValueInvalid", "must be empty", "metadata.resourceVersion")],
            )
        for owned in ("deletionTimestamp", "deletionGracePeriodSeconds", "uid", "generation"):
            meta.pop(owned, None)
        if manager is not None:
            meta.pop("managedFields", None)
        _check_labels(meta)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = self._now()
        meta["generation"] = 1
        if served.decl.status_subresource:
            body.pop("status", None)
        obj = served.validate(body)
        if manager is not None:
            served.ownership.record_update(None, obj, manager, "", self._now())
        if dry_run:
            return obj
        return await self.storage.create(served.key, target.namespace, meta["name"], obj)

    async def _update(
        self, request: Request, target: _Target, query: dict[str, str], dry_run: bool
    ) -> Response:
        served = target.served
        body = _body(request, JSON)
        _check_type(served, body)
        meta = _metadata(body)
        _check_names(meta, target)
        old = await self._get(target)
        _check_uid(meta.get("uid"), old)
        version = _version(meta.get("resourceVersion"))
        if version is None:  # as for a custom resource: no unconditional update
            raise StatusError(
                422,
                f'{served.decl.kind} "{target.name}" is invalid: metadata.resourceVersion: Invalid value: '
                "0x0: must be specified for an update (read the object, change it, and send it back)",
                reason="Invalid",
                causes=[("FieldValueInvalid", "must be specified for an update", "metadata.resourceVersion")],
            )
        manager = manager_name(query, request.header("user-agent"))
        new = self._merge_update(served, old, body, target.subresource, manager)
        if _same(old, new) and str(version) == old["metadata"]["resourceVersion"]:
            return self._object(request, served, old, 200)
        stored = await self._write(target, old, new, version, dry_run)
        return self._object(request, served, stored, 200)

    async def _write(
        self, target: _Target, old: dict[str, Any], new: dict[str, Any], version: int | None, dry_run: bool
    ) -> dict[str, Any]:
        """Store ``new`` over ``old`` (409 if ``version`` is set and not current); the write that
        leaves an object being deleted without finalizers deletes it."""
        served = target.served
        if dry_run:
            if version is not None and str(version) != old["metadata"]["resourceVersion"]:
                raise _stale(served, target.name)
            return {
                **new,
                "metadata": {**new["metadata"], "resourceVersion": old["metadata"]["resourceVersion"]},
            }
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            await self.storage.delete(
                served.key,
                target.namespace,
                target.name,
                resource_version=version
                if version is not None
                else _version(old["metadata"]["resourceVersion"]),
            )
            return new
        return await self.storage.update(
            served.key, target.namespace, target.name, new, resource_version=version
        )

    async def _patch(
        self,
        request: Request,
        target: _Target,
        query: dict[str, str],
        dry_run: bool,
        may_create: Callable[[], Awaitable[None]] | None = None,
    ) -> Response:
        served = target.served
        media = _media(request)
        if media == _STRATEGIC and not served.strategic:
            raise StatusError(
                415,
                f"{media} is not supported for {served.decl.plural}.{served.decl.group}: its model declares "
                f"no list types (ListType), so there is nothing strategic to merge; send {_MERGE}, "
                f"{_JSON_PATCH} or {_APPLY}",
            )
        if media == _APPLY:
            return await self._apply(request, target, query, dry_run, may_create)
        if media not in (_MERGE, _JSON_PATCH, _STRATEGIC):
            raise StatusError(
                415,
                f"Content-Type {media!r} is not a patch: send {_MERGE}, {_JSON_PATCH}, {_APPLY}"
                + (f" or {_STRATEGIC}" if served.strategic else ""),
            )
        patch = _decode(request.body)
        if media != _JSON_PATCH and not isinstance(patch, dict):
            raise StatusError(400, f"a {media} body must be a JSON object")
        manager = manager_name(query, request.header("user-agent"))
        for attempt in range(_PATCH_RETRIES):
            old = await self._get(target)
            if media == _MERGE:
                patched = merge_patch(old, patch)
            elif media == _JSON_PATCH:
                patched = json_patch(old, patch)
            else:
                patched = strategic_merge_patch(old, patch, served.list_rule)
            if not isinstance(patched, dict):
                raise StatusError(422, "the patched object is not an object")
            _check_type(served, patched)
            meta = _metadata(patched)
            asked = _version(meta.get("resourceVersion"))
            pinned = asked is not None and str(asked) != old["metadata"]["resourceVersion"]
            if meta.get("name") != target.name or meta.get("uid") != old["metadata"].get("uid"):
                raise StatusError(422, "a patch may not change metadata.name or metadata.uid")
            new = self._merge_update(served, old, patched, target.subresource, manager)
            if _same(old, new):
                return self._object(request, served, old, 200)
            try:
                stored = await self._write(
                    target,
                    old,
                    new,
                    asked if pinned else _version(old["metadata"]["resourceVersion"]),
                    dry_run,
                )
            except StatusError as exc:
                if exc.code != 409 or pinned or attempt == _PATCH_RETRIES - 1:
                    raise
                continue
            return self._object(request, served, stored, 200)
        raise AssertionError("unreachable")

    async def _apply(
        self,
        request: Request,
        target: _Target,
        query: dict[str, str],
        dry_run: bool,
        may_create: Callable[[], Awaitable[None]] | None = None,
    ) -> Response:
        """Server-side apply (:mod:`kubeop.apiserver.apply`): creates the object when there is none."""
        served = target.served
        manager = query.get("fieldManager")
        if not manager:
            raise StatusError(
                400,
                "fieldManager is required for apply requests: send ?fieldManager=<your controller's name>",
                causes=[("FieldValueRequired", "required for apply", "fieldManager")],
            )
        manager = manager_name(query, None)
        force = query.get("force") in ("true", "1")
        try:
            applied = load_yaml(request.body.decode())
        except (UnicodeDecodeError, yaml.YAMLError) as exc:
            raise StatusError(400, f"the apply configuration is not YAML or JSON: {exc}") from None
        if not isinstance(applied, dict):
            raise StatusError(400, "an apply configuration must be an object (apiVersion, kind, metadata...)")
        if not applied.get("apiVersion") or not applied.get("kind"):
            raise StatusError(
                400,
                "an apply configuration needs apiVersion and kind; add "
                f"apiVersion: {served.decl.api_version} and kind: {served.decl.kind}",
            )
        _check_type(served, applied)
        meta = _metadata(applied)
        _check_names(meta, target)
        asked = _version(meta.get("resourceVersion"))
        ownership = served.ownership
        for attempt in range(_PATCH_RETRIES):
            try:
                old: dict[str, Any] | None = await self._get(target)
            except StatusError as exc:
                if exc.code != 404 or target.subresource:
                    raise
                old = None
            if old is None:
                if may_create is not None:
                    await may_create()  # an apply that creates is a create: patch alone is not enough
                body = ownership.apply(None, applied, manager, "", force=force, now=self._now())
                body.update(apiVersion=served.decl.api_version, kind=served.decl.kind)
                body["metadata"]["name"] = target.name
                try:
                    made = await self._create_object(target, body, dry_run, manager=None)
                except StatusError as exc:
                    if exc.code == 409 and attempt < _PATCH_RETRIES - 1:
                        continue
                    raise
                return self._object(request, served, made, 201)
            if asked is not None and str(asked) != old["metadata"]["resourceVersion"]:
                raise _stale(served, target.name)
            merged = ownership.apply(old, applied, manager, target.subresource, force=force, now=self._now())
            new = self._merge_update(served, old, merged, target.subresource, None)
            if _same(old, new):
                return self._object(request, served, old, 200)
            try:
                stored = await self._write(
                    target, old, new, _version(old["metadata"]["resourceVersion"]), dry_run
                )
            except StatusError as exc:
                if exc.code != 409 or attempt == _PATCH_RETRIES - 1:
                    raise
                continue
            return self._object(request, served, stored, 200)
        raise AssertionError("unreachable")

    async def _scale(
        self, request: Request, target: _Target, query: dict[str, str], dry_run: bool
    ) -> Response:
        """The scale subresource (:mod:`kubeop.apiserver.scale`): get, update (PUT a Scale) and
        patch (merge, JSON or strategic patch of the Scale); a write sets only the desired count."""
        served = target.served
        scale = served.decl.scale
        assert scale is not None  # the path is 404 for a kind without one
        if request.method in ("GET", "HEAD"):
            return _json(200, scale_of(scale, await self._get(target)))
        media = _media(request)
        if request.method == "PUT":
            body = _body(request, JSON)
        elif media in (_MERGE, _JSON_PATCH, _STRATEGIC):
            body = _decode(request.body)
            if media != _JSON_PATCH and not isinstance(body, dict):
                raise StatusError(400, f"a {media} body must be a JSON object")
        else:
            raise StatusError(
                415,
                f"Content-Type {media!r} is not a patch of a Scale: "
                f"send {_MERGE}, {_JSON_PATCH} or {_STRATEGIC}",
            )
        manager = manager_name(query, request.header("user-agent"))
        for attempt in range(_PATCH_RETRIES):
            old = await self._get(target)
            current = scale_of(scale, old)
            if request.method == "PUT":
                wanted = body
            elif media == _JSON_PATCH:
                wanted = json_patch(patch_base(scale, old), body)
            else:  # a Scale has no lists: a strategic merge is a merge
                wanted = merge_patch(patch_base(scale, old), body)
            replicas, asked = scale_request(wanted, target.name, target.namespace)
            if request.method == "PUT":  # a Scale's uid is a precondition of its update, as kube's
                _check_uid(body.get("metadata", {}).get("uid"), old)
            live = old["metadata"]["resourceVersion"]
            # a precondition is a version the caller sent (a patch's result carries the live one)
            precondition = asked if request.method == "PUT" or asked != live else None
            if precondition is not None and precondition != live:
                raise _stale(served, target.name)
            new = self._merge_update(served, old, with_replicas(scale, old, replicas), "scale", manager)
            if _same(old, new):
                return _json(200, current)
            try:
                stored = await self._write(target, old, new, _version(live), dry_run)
            except StatusError as exc:
                if exc.code != 409 or precondition is not None or attempt == _PATCH_RETRIES - 1:
                    raise
                continue
            return _json(200, scale_of(scale, stored))
        raise AssertionError("unreachable")

    async def _delete(self, request: Request, target: _Target, dry_run: bool) -> Response:
        served = target.served
        options, dry_run = _delete_options(request, dry_run)
        pre = options.get("preconditions") or {}
        if not isinstance(pre, dict):
            raise StatusError(400, "preconditions must be an object")
        gone = await self._delete_one(
            target,
            await self._get(target),
            dry_run,
            resource_version=_version(pre.get("resourceVersion")),
            uid=pre.get("uid") if isinstance(pre.get("uid"), str) else None,
        )
        return self._object(request, served, gone, 200)

    async def _delete_one(
        self,
        target: _Target,
        old: dict[str, Any],
        dry_run: bool,
        *,
        resource_version: int | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        """Delete ``old`` (its state when read), or mark it deleted while finalizers remain."""
        served, meta = target.served, old["metadata"]
        if uid is not None and uid != meta.get("uid"):
            raise StatusError(
                409,
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid')}",
                group=served.decl.group,
                kind=served.decl.plural,
                name=meta["name"],
            )
        if resource_version is not None and str(resource_version) != meta["resourceVersion"]:
            raise _stale(served, meta["name"])
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return old
            new = copy_json(old)
            new["metadata"]["deletionTimestamp"] = self._now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["metadata"]["generation"] = int(meta.get("generation", 1)) + 1
            new["metadata"].pop("resourceVersion")
            return await self._write(target, old, new, _version(meta["resourceVersion"]), dry_run)
        if dry_run:
            return old
        return await self.storage.delete(
            served.key, target.namespace, meta["name"], resource_version=_version(meta["resourceVersion"])
        )

    async def _delete_collection(
        self, request: Request, target: _Target, query: dict[str, str], dry_run: bool
    ) -> Response:
        served = target.served
        _, dry_run = _delete_options(request, dry_run)  # client-go sends dryRun in the body only
        page = await self.storage.list(
            served.key,
            ListOptions(
                namespace=target.namespace or None, labels=_labels(query), fields=self._fields(served, query)
            ),
        )
        deleted = []
        for obj in page.items:
            meta = obj["metadata"]
            one = _Target(served, meta.get("namespace", ""), meta["name"], "", False)
            for attempt in range(_PATCH_RETRIES):
                try:
                    deleted.append(await self._delete_one(one, await self._get(one), dry_run))
                except StatusError as exc:
                    if exc.code == 409 and attempt < _PATCH_RETRIES - 1:
                        continue
                    if exc.code != 404:
                        raise
                break
        return _json(
            200,
            {
                "apiVersion": served.decl.api_version,
                "kind": served.decl.list_kind,
                "metadata": {"resourceVersion": str(page.resource_version)},
                "items": deleted,
            },
        )

    # -- helpers -----------------------------------------------------------------------------

    def _merge_update(
        self,
        served: ServedResource,
        old: dict[str, Any],
        body: dict[str, Any],
        subresource: str,
        manager: str | None,
    ) -> dict[str, Any]:
        """The object to store: the server's metadata kept, status from the right endpoint,
        generation bumped when the rest changed, the changed fields given to ``manager`` (None:
        managedFields are already set, by an apply); validated."""
        old_meta = old["metadata"]
        if subresource == "status":
            new = copy_json(old)
            if "status" in body:
                new["status"] = copy_json(body["status"])
            else:
                new.pop("status", None)
        else:
            new = copy_json(body)
            meta = new["metadata"]
            for owned in _SERVER_META:
                if owned in old_meta:
                    meta[owned] = old_meta[owned]
                else:
                    meta.pop(owned, None)
            if old_meta.get("deletionTimestamp"):
                added = [
                    f for f in meta.get("finalizers") or () if f not in (old_meta.get("finalizers") or ())
                ]
                if added:
                    raise StatusError(
                        422,
                        f"metadata.finalizers: Forbidden: no new finalizers can be added if the object is "
                        f"being deleted, found new finalizers {added}",
                        kind=served.decl.kind,
                        name=old_meta["name"],
                        causes=[
                            ("FieldValueForbidden", "no new finalizers while deleting", "metadata.finalizers")
                        ],
                    )
            meta.pop("resourceVersion", None)
            _check_labels(meta)
            if served.decl.status_subresource:
                if "status" in old:
                    new["status"] = copy_json(old["status"])
                else:
                    new.pop("status", None)
        new["metadata"].pop("resourceVersion", None)
        valid = served.validate(new)
        if _spec(valid) != _spec(old):
            valid["metadata"]["generation"] = int(old_meta.get("generation", 1)) + 1
        if manager is not None:
            served.ownership.record_update(old, valid, manager, subresource, self._now())
        return valid

    def _fields(self, served: ServedResource, query: dict[str, str]) -> FieldSelector:
        text = query.get("fieldSelector", "")
        try:
            selector = FieldSelector.parse(text)
        except SelectorError as exc:
            raise StatusError(400, f"fieldSelector: {exc}") from None
        allowed = {
            "metadata.name",
            "metadata.namespace",
            *(f.lstrip(".") for f in served.decl.selectable_fields),
        }
        for requirement in selector.requirements:
            if requirement.field not in allowed:
                raise StatusError(
                    400,
                    f'field label not supported: "{requirement.field}" '
                    f"(supported: {', '.join(sorted(allowed))})",
                )
        return selector

    def _object(self, request: Request, served: ServedResource, obj: dict[str, Any], code: int) -> Response:
        if _table_format(request):
            return _json(code, served.table([obj], _query(request).get("includeObject", "Metadata")))
        return _json(code, obj)

    def _now(self) -> str:
        return self._clock().strftime("%Y-%m-%dT%H:%M:%SZ")


_SERVER_META = (
    "uid",
    "creationTimestamp",
    "generation",
    "namespace",
    "name",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


def _is_read(verb: str) -> bool:
    return verb in ("get", "list", "watch")


def _stale(served: ServedResource, name: str) -> StatusError:
    return StatusError(
        409,
        f'Operation cannot be fulfilled on {served.decl.plural}.{served.decl.group} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        group=served.decl.group,
        kind=served.decl.plural,
        name=name,
    )


def _check_uid(uid: Any, old: dict[str, Any]) -> None:
    """409 when an update's body names a uid that is not the stored object's."""
    if uid and uid != old["metadata"].get("uid"):
        raise StatusError(
            409,
            f"Precondition failed: UID in object meta: {uid}, UID of the stored object: "
            f"{old['metadata'].get('uid')} (the object was deleted and made anew; read it again)",
            reason="Conflict",
        )


def _no_path(path: str) -> StatusError:
    return StatusError(404, f"the server could not find the requested resource ({path})")


def _check_names(meta: dict[str, Any], target: _Target) -> None:
    """400 when the body's name or namespace is not the URL's (left out, they are the URL's)."""
    if meta.get("name", target.name) != target.name:
        raise StatusError(
            400,
            f"the name of the object ({meta.get('name')}) does not match the name on the URL ({target.name})",
        )
    if target.served.namespaced and meta.get("namespace", target.namespace) != target.namespace:
        raise StatusError(
            400, "the namespace of the provided object does not match the namespace sent on the request"
        )


def _delete_options(request: Request, dry_run: bool) -> tuple[dict[str, Any], bool]:
    """A delete's DeleteOptions body (none: ``{}``), and whether it is a dry run (the query's
    ``dryRun`` or the body's)."""
    options = _decode(request.body) if request.body else {}
    if not isinstance(options, dict):
        raise StatusError(400, "the body of a delete must be DeleteOptions (an object)")
    if options.get("dryRun") not in (None, [], ["All"]):
        raise StatusError(400, "DeleteOptions.dryRun: the only value is [All]")
    return options, dry_run or options.get("dryRun") == ["All"]


def _query(request: Request) -> dict[str, str]:
    try:
        pairs = parse_qsl(request.query, keep_blank_values=True, strict_parsing=False, max_num_fields=64)
    except ValueError as exc:
        raise StatusError(400, f"the query string is malformed: {exc}") from None
    return dict(pairs)


def _int(query: dict[str, str], name: str, default: int) -> int:
    text = query.get(name)
    if text is None or text == "":
        return default
    if not text.isascii() or not text.isdigit() or len(text) > 12:
        raise StatusError(400, f"{name}: {text!r} is not a non-negative integer")
    return int(text)


def _version(value: Any) -> int | None:
    if value is None or value == "":
        return None
    text = str(value)
    if not text.isascii() or not text.isdigit() or len(text) > 19:
        raise StatusError(400, f"resourceVersion: {text[:40]!r} is not a resourceVersion this server made")
    return int(text)


def _labels(query: dict[str, str]) -> LabelSelector:
    try:
        return LabelSelector.parse(query.get("labelSelector", ""))
    except SelectorError as exc:
        raise StatusError(400, f"labelSelector: {exc}") from None


def _media(request: Request) -> str:
    return (request.header("content-type") or "").partition(";")[0].strip().lower()


def _decode(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise StatusError(400, f"the body is not JSON: {exc}") from None


def _body(request: Request, media: str) -> dict[str, Any]:
    if _media(request) != media:
        raise StatusError(415, f"Content-Type {_media(request)!r} is not accepted here: send {media}")
    body = _decode(request.body)
    if not isinstance(body, dict):
        raise StatusError(400, "the body must be a JSON object")
    return body


def _metadata(body: dict[str, Any]) -> dict[str, Any]:
    meta = body.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise StatusError(
            422, "metadata must be an object", causes=[("FieldValueInvalid", "not an object", "metadata")]
        )
    return meta


def _check_type(served: ServedResource, body: dict[str, Any]) -> None:
    decl = served.decl
    api_version, kind = body.setdefault("apiVersion", decl.api_version), body.setdefault("kind", decl.kind)
    if api_version != decl.api_version or kind != decl.kind:
        raise StatusError(
            400,
            f"the object is {api_version}/{kind}, but this endpoint serves {decl.api_version}/{decl.kind}",
        )


def _check_labels(meta: dict[str, Any]) -> None:
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        raise StatusError(422, "metadata.labels must be a map of strings")
    for key, value in labels.items():
        try:
            if not isinstance(value, str):
                raise SelectorError(f"the value of {key!r} is not a string")
            validate_label_key(key)
            validate_label_value(key, value)
        except SelectorError as exc:
            raise StatusError(
                422,
                f"metadata.labels: {exc}",
                causes=[("FieldValueInvalid", str(exc), f"metadata.labels[{key}]")],
            ) from None


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return {
        **new,
        "metadata": {**new["metadata"], "resourceVersion": old["metadata"].get("resourceVersion")},
    } == old


def _table_format(request: Request) -> bool:
    """True when the Accept header asks for a Table first (kubectl get); 406 when it accepts
    nothing this server answers (JSON: a plain object, or a meta.k8s.io/v1 Table)."""
    accept = request.header("accept")
    if not accept:
        return False
    plain = False
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        options = dict(p.partition("=")[::2] for p in params)
        if media not in ("application/json", "*/*", "application/*"):
            continue
        shape = options.get("as")
        if shape == "Table" and options.get("g") == "meta.k8s.io" and options.get("v") in ("v1", "v1beta1"):
            return not plain
        if shape is None:
            plain = True
            return False
    raise StatusError(
        406, f"none of the media types in Accept ({accept[:200]}) can be answered; accept {JSON}"
    )


def _json(code: int, body: Any) -> Response:
    return Response(code, orjson.dumps(body), JSON)


def decode_segments(path: str, prefix: str) -> list[str]:
    """The path's segments after ``prefix`` (percent-decoded, empty ones refused)."""
    rest = path[len(prefix) :].strip("/")
    if not rest:
        return []
    segments = [unquote(s) for s in rest.split("/")]
    if any(not s for s in segments):
        raise _no_path(path)
    return segments
