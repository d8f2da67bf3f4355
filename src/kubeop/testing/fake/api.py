"""The fake cluster's REST layer: a :class:`~kubeop.core.request.ApiRequest` in, decoded JSON out.

Routes paths as kube-apiserver does (``/api/v1/namespaces/{ns}/{plural}/{name}/{subresource}``,
``/apis/{group}/{version}/...``), decodes bodies, picks the verb from the method and query, and
answers discovery (aggregated and legacy) from the kinds the store serves. Failures are
:class:`~kubeop.testing.fake.store.Failure` values carrying the ``Status`` the server would send.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import orjson

from kubeop.core.patch import PatchType
from kubeop.core.request import ApiRequest
from kubeop.core.selectors import FieldSelector, LabelSelector, SelectorError
from kubeop.testing.fake.kinds import Kind
from kubeop.testing.fake.patches import PatchError, json_patch, merge_patch, strategic_merge_patch
from kubeop.testing.fake.store import Failure, Obj, Store, Watch, bad_request

__all__ = ["Api", "bookmark"]

_AGGREGATED = "as=APIGroupDiscoveryList"
_METADATA = "as=PartialObjectMetadata"
_SCALE_KIND = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


class Api:
    """Serves one :class:`Store` over the request values kubeop's client builds."""

    def __init__(self, store: Store, monotonic: Callable[[], float]) -> None:
        self.store = store
        self._monotonic = monotonic
        self._continues: dict[str, list[Obj]] = {}
        self._tokens = itertools.count(1)

    # -- entry points ---------------------------------------------------------------------------

    def handle(self, req: ApiRequest) -> Any:
        query = dict(req.query)
        route = self._route(req.path)
        if route is None:
            return self._other(req)
        kind, namespace, name, sub = route
        dry_run = query.get("dryRun") == "All"
        method = req.method
        if name is None:
            if method == "GET":
                return self._list(kind, namespace, query, req.accept or "")
            if method == "POST":
                return self.store.view(kind, self.store.create(kind, namespace, _body(req), dry_run=dry_run))
            if method == "DELETE":
                return self._delete_collection(kind, namespace, query, _body(req) or {}, dry_run)
            raise _not_allowed(method, kind)
        if kind.namespaced and namespace is None:
            raise bad_request(f"{kind.plural} is namespaced: the path needs /namespaces/<namespace>/")
        if (
            sub not in (None, "status", "scale")
            or (sub == "status" and not kind.status)
            or (sub == "scale" and kind.scale is None)
        ):
            raise Failure(
                404, "NotFound", f"the server could not find the requested resource ({kind.plural}/{sub})"
            )
        if method == "GET":
            obj = self.store.get(kind, namespace, name)
            return self.store.scale_of(kind, obj) if sub == "scale" else self.store.view(kind, obj)
        if method == "PUT":
            body = _body(req)
            if sub == "scale":
                return self.store.set_scale(kind, namespace, name, body, dry_run=dry_run)
            return self.store.view(
                kind, self.store.update(kind, namespace, name, body, subresource=sub, dry_run=dry_run)
            )
        if method == "PATCH":
            return self._patch(kind, namespace, name, sub, req, query, dry_run)
        if method == "DELETE":
            if sub:
                raise _not_allowed(method, kind)
            options = _body(req) or {}
            obj = self.store.get(kind, namespace, name)
            left = self.store.delete(kind, namespace, name, options, dry_run=dry_run)
            if left is not None:
                return self.store.view(kind, left)
            return _success(kind, name, obj["metadata"]["uid"])
        raise _not_allowed(method, kind)

    def open_watch(self, req: ApiRequest, owner: object) -> tuple[list[tuple[str, Obj]], Watch]:
        """Register a watch and return the events it starts with (synchronously: no gap)."""
        query = dict(req.query)
        route = self._route(req.path)
        if route is None or route[2] is not None:
            raise Failure(404, "NotFound", f"the server could not find the requested resource ({req.path})")
        kind, namespace, _, _ = route
        labels, fields = self._selectors(kind, query)
        timeout = query.get("timeoutSeconds")
        watch = Watch(
            kind=kind,
            namespace=namespace if kind.namespaced else None,
            labels=labels,
            fields=fields,
            bookmarks=query.get("allowWatchBookmarks") == "true",
            metadata_only=_METADATA in (req.accept or ""),
            deadline=self._monotonic() + float(timeout) if timeout else None,
            owner=owner,
        )
        rv = query.get("resourceVersion") or ""
        initial: list[tuple[str, Obj]] = []
        store = self.store
        if query.get("sendInitialEvents") == "true" or rv in ("", "0"):
            for obj in store.select(kind, watch.namespace, labels, fields):
                initial.append(("ADDED", watch.view(obj)))
            if query.get("sendInitialEvents") == "true":
                initial.append(("BOOKMARK", bookmark(kind, store.rv, initial_end=True)))
        else:
            if not rv.isdigit():
                raise bad_request(f"invalid resourceVersion {rv!r}: not a number")
            since = int(rv)
            if since < store.compacted:
                raise Failure(410, "Expired", f"too old resource version: {since} ({store.compacted})")
            for event in store.replay(watch, since):
                seen = watch.see(event)
                if seen is not None:
                    initial.append(seen)
        store.watches.add(watch)
        return initial, watch

    # -- routing --------------------------------------------------------------------------------

    def _route(self, path: str) -> tuple[Kind, str | None, str | None, str | None] | None:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        plural, name, sub = rest[0], rest[1] if len(rest) > 1 else None, "/".join(rest[2:]) or None
        kind = self.store.kinds.get(group, version, plural)
        if kind is None:
            raise Failure(404, "NotFound", f"the server could not find the requested resource ({path})")
        if not kind.namespaced and namespace is not None:
            raise Failure(
                404, "NotFound", f"{plural} is cluster-scoped: no /namespaces/ in its path ({path})"
            )
        return kind, namespace, name, sub

    # -- verbs ----------------------------------------------------------------------------------

    def _selectors(
        self, kind: Kind, query: dict[str, str]
    ) -> tuple[LabelSelector | None, FieldSelector | None]:
        try:
            labels = LabelSelector.parse(query["labelSelector"]) if query.get("labelSelector") else None
            fields = FieldSelector.parse(query["fieldSelector"]) if query.get("fieldSelector") else None
        except SelectorError as e:
            raise bad_request(str(e)) from None
        if fields is not None:
            for requirement in fields.requirements:
                if requirement.field not in kind.fields:
                    known = ", ".join(f'"{f}"' for f in sorted(kind.fields))
                    raise bad_request(f'"{requirement.field}" is not a known field selector: only {known}')
        return labels, fields

    def _list(self, kind: Kind, namespace: str | None, query: dict[str, str], accept: str) -> Obj:
        store = self.store
        token = query.get("continue")
        if token:
            remaining = self._continues.pop(token, None)
            if remaining is None:
                raise Failure(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter.",
                )
            items, rv = remaining[1:], remaining[0]["rv"]
        else:
            labels, fields = self._selectors(kind, query)
            items, rv = store.select(kind, namespace if kind.namespaced else None, labels, fields), store.rv
            rv_param = query.get("resourceVersion") or ""
            exact = rv_param and rv_param != "0" and query.get("resourceVersionMatch") == "Exact"
            if exact and (not rv_param.isdigit() or int(rv_param) < store.compacted):
                raise Failure(410, "Expired", f"too old resource version: {rv_param} ({store.compacted})")
            if exact:
                ns = namespace if kind.namespaced else None
                items, rv = store.select_at(kind, int(rv_param), ns, labels, fields), int(rv_param)
        metadata_only = _METADATA in accept
        meta: Obj = {"resourceVersion": str(rv)}
        limit = int(query["limit"]) if query.get("limit") else None
        if limit is not None and len(items) > limit:
            rest = items[limit:]
            items = items[:limit]
            token = f"fake-continue-{next(self._tokens)}"
            self._continues[token] = [{"rv": rv}, *rest]
            meta["continue"] = token
            meta["remainingItemCount"] = len(rest)
        out = []
        for obj in items:
            view = store.view(kind, obj)
            if metadata_only:
                view = {
                    "apiVersion": "meta.k8s.io/v1",
                    "kind": "PartialObjectMetadata",
                    "metadata": view["metadata"],
                }
            elif not kind.custom:
                del view["apiVersion"], view["kind"]  # as the server sends built-in kinds in lists
            out.append(view)
        if metadata_only:
            return {
                "apiVersion": "meta.k8s.io/v1",
                "kind": "PartialObjectMetadataList",
                "metadata": meta,
                "items": out,
            }
        return {"apiVersion": kind.api_version, "kind": f"{kind.kind}List", "metadata": meta, "items": out}

    def _delete_collection(
        self, kind: Kind, namespace: str | None, query: dict[str, str], options: Obj, dry_run: bool
    ) -> Obj:
        labels, fields = self._selectors(kind, query)
        deleted = []
        for obj in self.store.select(kind, namespace, labels, fields):
            meta = obj["metadata"]
            left = self.store.delete(kind, meta.get("namespace"), meta["name"], options, dry_run=dry_run)
            deleted.append(self.store.view(kind, left if left is not None else obj))
        return {
            "apiVersion": kind.api_version,
            "kind": f"{kind.kind}List",
            "metadata": {"resourceVersion": str(self.store.rv)},
            "items": deleted,
        }

    def _patch(
        self,
        kind: Kind,
        namespace: str | None,
        name: str,
        sub: str | None,
        req: ApiRequest,
        query: dict[str, str],
        dry_run: bool,
    ) -> Obj:
        store = self.store
        try:
            patch_type = PatchType(req.content_type)
        except ValueError:
            raise Failure(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format: {req.content_type}",
            ) from None
        patch = _body(req)
        if patch_type is PatchType.STRATEGIC and not kind.strategic:
            raise Failure(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f"application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml "
                f"(strategic merge patch is for built-in kinds; {kind.kind} is a custom resource)",
            )
        if patch_type is PatchType.APPLY:
            manager = query.get("fieldManager")
            if not manager:
                raise bad_request("PATCH of type apply requires a fieldManager")
            if sub == "scale":
                raise Failure(
                    415, "UnsupportedMediaType", "the fake cluster does not apply to the scale subresource"
                )
            merge = strategic_merge_patch if kind.strategic else merge_patch
            obj = store.apply(
                kind, namespace, name, patch, manager,
                force=query.get("force") == "true", subresource=sub, merge=merge, dry_run=dry_run,
            )  # fmt: skip
            return store.view(kind, obj)
        current = store.get(kind, namespace, name)
        base = store.scale_of(kind, current) if sub == "scale" else store.view(kind, current)
        try:
            if patch_type is PatchType.JSON:
                new = json_patch(base, patch)
            elif patch_type is PatchType.MERGE:
                if not isinstance(patch, dict):
                    raise PatchError(400, "BadRequest", "a merge patch must be a JSON object")
                new = merge_patch(base, patch)
            else:
                if not isinstance(patch, dict):
                    raise PatchError(400, "BadRequest", "a strategic merge patch must be a JSON object")
                new = strategic_merge_patch(base, patch)
        except PatchError as e:
            raise Failure(e.code, e.reason, e.message) from None
        if not isinstance(new, dict):
            raise bad_request("the patch does not leave an object")
        if sub == "scale":
            return store.set_scale(kind, namespace, name, new, dry_run=dry_run)
        # Only a resourceVersion the patch itself names is a precondition.
        if patch_type is PatchType.JSON:
            pinned = _touches_version(patch)
        else:
            pinned = isinstance(patch, dict) and "resourceVersion" in (patch.get("metadata") or {})
        if not pinned:
            new.setdefault("metadata", {}).pop("resourceVersion", None)
        obj = store.update(
            kind, namespace, name, new, subresource=sub, dry_run=dry_run, require_version=False
        )
        return store.view(kind, obj)

    # -- everything that is not a resource --------------------------------------------------------

    def _other(self, req: ApiRequest) -> Any:
        path = req.path.rstrip("/") or "/"
        accept = req.accept or ""
        if req.method != "GET":
            raise Failure(405, "MethodNotAllowed", f"the server does not allow this method on {path}")
        if path in ("/readyz", "/healthz", "/livez"):
            return None
        if path == "/version":
            return {"major": "1", "minor": "33", "gitVersion": "v1.33.0-kubeop-fake", "platform": "fake"}
        if path == "/api":
            if _AGGREGATED in accept:
                return self._aggregated(core=True)
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            if _AGGREGATED in accept:
                return self._aggregated(core=False)
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group(g) for g in self._groups()],
            }
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            return self._resource_list("", parts[1])
        if parts[0] == "apis" and len(parts) == 2 and parts[1] in self._groups():
            return self._group(parts[1])
        if parts[0] == "apis" and len(parts) == 3:
            return self._resource_list(parts[1], parts[2])
        raise Failure(404, "NotFound", f"the server could not find the requested resource ({path})")

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for kind in self.store.kinds:
            if kind.group:
                versions = groups.setdefault(kind.group, [])
                if kind.version not in versions:
                    versions.append(kind.version)
        return {g: sorted(vs, key=_version_priority) for g, vs in groups.items()}

    def _group(self, name: str) -> Obj:
        versions = self._groups()[name]
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": name,
            "versions": entries,
            "preferredVersion": entries[0],
        }

    def _resource_list(self, group: str, version: str) -> Obj:
        kinds = [k for k in self.store.kinds if k.group == group and k.version == version]
        if not kinds:
            raise Failure(
                404, "NotFound", f"the server could not find the requested resource ({group}/{version})"
            )
        resources: list[Obj] = []
        for k in kinds:
            resources.append(
                {
                    "name": k.plural,
                    "singularName": k.singular or k.kind.lower(),
                    "namespaced": k.namespaced,
                    "kind": k.kind,
                    "verbs": _VERBS,
                    "shortNames": list(k.short_names),
                    "categories": list(k.categories),
                }
            )
            for sub in (("status",) if k.status else ()) + (("scale",) if k.scale else ()):
                resources.append(
                    {"name": f"{k.plural}/{sub}", "singularName": "", "namespaced": k.namespaced,
                     "kind": "Scale" if sub == "scale" else k.kind, "verbs": ["get", "patch", "update"]}
                )  # fmt: skip
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    def _aggregated(self, *, core: bool) -> Obj:
        items = []
        groups = {"": ["v1"]} if core else self._groups()
        for group, versions in groups.items():
            entry_versions = []
            for version in versions:
                resources = []
                for k in self.store.kinds:
                    if k.group != group or k.version != version:
                        continue
                    subs = [
                        {
                            "subresource": s,
                            "responseKind": _SCALE_KIND
                            if s == "scale"
                            else {"group": group, "version": version, "kind": k.kind},
                            "verbs": ["get", "patch", "update"],
                        }
                        for s in (("status",) if k.status else ()) + (("scale",) if k.scale else ())
                    ]
                    resources.append(
                        {
                            "resource": k.plural,
                            "responseKind": {"group": group, "version": version, "kind": k.kind},
                            "scope": "Namespaced" if k.namespaced else "Cluster",
                            "singularResource": k.singular or k.kind.lower(),
                            "shortNames": list(k.short_names),
                            "categories": list(k.categories),
                            "verbs": _VERBS,
                            "subresources": subs,
                        }
                    )
                entry_versions.append({"version": version, "resources": resources, "freshness": "Current"})
            items.append({"metadata": {"name": group} if group else {}, "versions": entry_versions})
        return {
            "kind": "APIGroupDiscoveryList",
            "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {},
            "items": items,
        }


def _body(req: ApiRequest) -> Any:
    if not req.body:
        return None
    try:
        return orjson.loads(req.body)
    except orjson.JSONDecodeError as e:
        raise bad_request(f"the request body is not JSON: {e}") from None


def _touches_version(ops: Any) -> bool:
    return isinstance(ops, list) and any(
        isinstance(op, dict) and str(op.get("path", "")).startswith("/metadata/resourceVersion") for op in ops
    )


def _not_allowed(method: str, kind: Kind) -> Failure:
    return Failure(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method on the requested resource ({method} {kind.plural})",
    )


def _success(kind: Kind, name: str, uid: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": kind.group, "kind": kind.plural, "uid": uid},
    }


def bookmark(kind: Kind, rv: int, *, initial_end: bool = False) -> Obj:
    meta: Obj = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}


_VERSION = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")


def _version_priority(version: str) -> tuple[int, int, int, str]:
    """kube's version order: GA before beta before alpha, higher numbers first, others last."""
    match = _VERSION.fullmatch(version)
    if match is None:
        return (3, 0, 0, version)
    major, level, minor = match.groups()
    rank = {None: 0, "beta": 1, "alpha": 2}[level]
    return (rank, -int(major), -int(minor or 0), version)
