"""Request building for every verb, as plain values and without any networking.

``RequestBuilder(resource, namespace).list(label_selector="app=web", limit=500)`` returns a
:class:`ApiRequest` (method, path, query, body, content type) that any transport can send; golden
tests pin the URLs with no server. Bodies are encoded here, once, with orjson.

Scope rules: for a namespaced resource, ``namespace=None`` means "all namespaces" for the
collection verbs (list, watch, delete_collection) and is an error for single-object verbs; for a
cluster-scoped resource the namespace is ignored (objects copied from elsewhere often carry one).

Everything a caller passes that becomes part of the path is checked before a request exists, as
the API server's own validation would (apimachinery's path segment rules), so no value can add a
segment, a dot segment a proxy would collapse, or break the request line (CR/LF, spaces):

- a name is any object name the API allows: not empty, not ``.`` or ``..``, no ``/`` or ``%``,
  no whitespace or control/invisible characters; what is not plain is percent-encoded;
- a namespace is a DNS-1123 label (``^[a-z0-9]([-a-z0-9]*[a-z0-9])?$``, at most 63 characters);
- a subresource is a lowercase path name (``status``, ``scale``, ``eviction``, ``log``...),
  optionally with one more such segment (``proxy/metrics``);
- group, version and plural are checked when the :class:`ApiResource` is made;
- a hand-made :class:`ApiRequest`'s path is refused if it is not an absolute path of plain or
  percent-encoded characters, or has empty, ``.`` or ``..`` segments (encoded ones included).

Query values are always percent-encoded (``urlencode``). Bad values raise :class:`ValueError`
naming the field, the value and the rule. The common case costs one precompiled ``fullmatch`` per
value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote, unquote, urlencode

import orjson

from kubeop.core.patch import PatchType
from kubeop.core.resource import ApiResource, invalid, shown
from kubeop.core.selectors import (
    FieldSelectorLike,
    LabelSelectorLike,
    Selectors,
    field_selector_text,
    label_selector_text,
)

__all__ = [
    "ApiRequest",
    "FieldSelectorLike",
    "FieldValidation",
    "LabelSelectorLike",
    "PropagationPolicy",
    "RequestBuilder",
    "ResourceVersionMatch",
    "field_selector_text",
    "label_selector_text",
]

PropagationPolicy = Literal["Foreground", "Background", "Orphan"]
ResourceVersionMatch = Literal["NotOlderThan", "Exact"]
FieldValidation = Literal["Strict", "Warn", "Ignore"]

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"})
_TOKEN = re.compile(r"[A-Z]{1,20}").fullmatch

# An absolute path whose segments are plain characters (RFC 3986 pchar without '%') and do not
# start with '.': every path RequestBuilder makes from DNS names. Anything else is checked by
# _check_path, which also allows percent-encoding.
_PLAIN_PATH = re.compile(r"(?:/[\w~:@!$&'()*+,;=-][\w.~:@!$&'()*+,;=-]*)+/?|/", re.ASCII).fullmatch
_PATH_CHAR = re.compile(r"[^\w.~:@!$&'()*+,;=%/-]", re.ASCII).search
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})").search
_PATH_RULE = (
    "an absolute path ('/api/v1/...') of letters, digits, \"-._~:@!$&'()*+,;=\" and percent-escapes, "
    "without empty, '.' or '..' segments (no whitespace, control characters, '?', '#' or non-ASCII)"
)


@dataclass(frozen=True, slots=True)
class ApiRequest:
    """One HTTP request to the API server, not yet sent.

    ``target`` names what the request is about (``configmaps "web" in namespace "prod"``) so
    errors can say which object failed; ``stream`` marks watches, whose response is read line
    by line instead of as one document; ``accept`` overrides the default ``application/json``
    (discovery asks for the aggregated format this way).
    """

    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    content_type: str | None = None
    target: str = ""
    stream: bool = False
    accept: str | None = None

    @property
    def url(self) -> str:
        """Path plus encoded query string, relative to the server URL."""
        return f"{self.path}?{urlencode(self.query)}" if self.query else self.path

    @property
    def idempotent(self) -> bool:
        """Safe to send twice: reads, and writes the server only pretends to do (dryRun)."""
        return self.method in _SAFE_METHODS or ("dryRun", "All") in self.query

    def __str__(self) -> str:
        return f"{self.method} {self.url}"

    def __post_init__(self) -> None:
        # The method and path go into the request line as they are: refuse anything that could
        # break it or that a proxy would rewrite (the query is always encoded, see ``url``).
        if self.method not in _METHODS and not (isinstance(self.method, str) and _TOKEN(self.method)):
            raise invalid("request method", self.method, "an HTTP method such as 'GET' or 'PATCH'")
        try:
            if _PLAIN_PATH(self.path):
                return
        except TypeError:
            pass
        _check_path(self.path)


_new = object.__new__
_set = object.__setattr__


def _built(
    method: str,
    path: str,
    query: tuple[tuple[str, str], ...] = (),
    body: bytes | None = None,
    content_type: str | None = None,
    target: str = "",
    stream: bool = False,
) -> ApiRequest:
    """An :class:`ApiRequest` from RequestBuilder, without ``__post_init__``'s check of the path.

    The builder's paths are made of checked segments, so checking the whole path again would be
    work on every API call for nothing; this sets the fields as the dataclass's ``__init__``
    would (a test keeps the two in step).
    """
    req: ApiRequest = _new(ApiRequest)
    _set(req, "method", method)
    _set(req, "path", path)
    _set(req, "query", query)
    _set(req, "body", body)
    _set(req, "content_type", content_type)
    _set(req, "target", target)
    _set(req, "stream", stream)
    _set(req, "accept", None)
    return req


def _check_path(path: object) -> None:
    if not isinstance(path, str) or not path.startswith("/"):
        raise invalid("request path", path, _PATH_RULE)
    bad = _PATH_CHAR(path)
    if bad:
        raise ValueError(
            f"invalid request path {shown(path)}: character {bad.group()!r} at {bad.start()} is not "
            f"allowed; must be {_PATH_RULE}"
        )
    if _BAD_ESCAPE(path):
        raise invalid("request path", path, f"{_PATH_RULE}; '%' starts an escape like '%2F'")
    segments = path[1:].split("/")
    last = len(segments) - 1
    for i, segment in enumerate(segments):
        if not segment:
            if i == last:  # "/" alone, or a trailing slash
                continue
            raise invalid("request path", path, f"{_PATH_RULE}; it has an empty segment ('//')")
        escaped = "%" in segment
        decoded = unquote(segment) if escaped else segment
        if decoded in (".", ".."):
            raise invalid("request path", path, f"{_PATH_RULE}; it has a {segment!r} segment")
        if escaped and ("/" in decoded or not decoded.isprintable()):
            raise invalid(
                "request path", path, f"{_PATH_RULE}; segment {segment!r} encodes '/' or a control character"
            )


# DNS names (almost every object): nothing to check further and nothing to escape. Starting with
# a letter or digit, they are never "." or "..".
_PLAIN_NAME = re.compile(r"[a-z0-9][-a-z0-9.]*").fullmatch
_NAMESPACE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?").fullmatch
_SUBRESOURCE = re.compile(r"[a-z][-a-z0-9]{0,62}(?:/[a-z][-a-z0-9]{0,62})?").fullmatch

_NAME_RULE = "an object name: not '.' or '..', without '/', '%', whitespace or control characters"
_NAMESPACE_RULE = (
    "a DNS-1123 label: lowercase letters, digits and '-', starting and ending with a letter or "
    "digit, at most 63 characters"
)
_SUBRESOURCE_RULE = (
    "a lowercase path name such as 'status', 'scale' or 'eviction' (letters, digits and '-', "
    "starting with a letter), optionally followed by one more such segment ('proxy/metrics')"
)


def _check_name(name: str, resource: ApiResource) -> str:
    """``name`` as a path segment: checked, and percent-encoded where it is not plain."""
    try:
        if _PLAIN_NAME(name):
            return name
    except TypeError:
        pass
    if name == "":
        raise ValueError(f"{resource.display_name}: name must not be empty")
    if (
        not isinstance(name, str)
        or name in (".", "..")
        or "/" in name
        or "%" in name
        or not name.isprintable()  # control characters, line/paragraph separators, invisible
        or " " in name  # ... and the one whitespace character isprintable() lets through
    ):
        raise ValueError(f"{resource.display_name}: {invalid('name', name, _NAME_RULE)}")
    return quote(name, safe=":@")


def _check_namespace(namespace: str) -> str:
    try:
        if _NAMESPACE(namespace):
            return namespace
    except TypeError:
        pass
    raise invalid("namespace", namespace, _NAMESPACE_RULE)


def _check_subresource(subresource: str) -> str:
    try:
        if _SUBRESOURCE(subresource):
            return subresource
    except TypeError:
        pass
    raise invalid("subresource", subresource, _SUBRESOURCE_RULE)


def _encode(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    return orjson.dumps(body)


class RequestBuilder:
    """Builds requests for one resource in one namespace (or all namespaces / cluster scope)."""

    __slots__ = ("_collection", "namespace", "resource")

    def __init__(self, resource: ApiResource, namespace: str | None = None) -> None:
        self.resource = resource
        self.namespace = namespace if resource.namespaced and namespace else None
        root = f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"
        if self.namespace:
            root = f"{root}/namespaces/{_check_namespace(self.namespace)}"
        self._collection = f"{root}/{resource.plural}"

    # -- paths ------------------------------------------------------------------------------------

    @property
    def collection_path(self) -> str:
        """The URL path of the resource's collection (in the builder's namespace, if namespaced)."""
        return self._collection

    def object_path(self, name: str, subresource: str | None = None) -> str:
        """The URL path of one object (and of its ``subresource``); raises ValueError for a namespaced
        resource without a namespace, or an invalid name.
        """
        if self.resource.namespaced and not self.namespace:
            raise ValueError(
                f"{self.resource.display_name} is namespaced: a namespace is needed to address {shown(name)}"
            )
        path = f"{self._collection}/{_check_name(name, self.resource)}"
        if subresource:
            path = f"{path}/{_check_subresource(subresource)}"
        return path

    def _target(self, name: str | None = None, subresource: str | None = None) -> str:
        what = self.resource.display_name
        if subresource:
            what = f"{what}/{subresource}"
        text = f'{what} "{name}"' if name else what
        if self.namespace:
            text += f' in namespace "{self.namespace}"'
        return text

    # -- reads --------------------------------------------------------------------------------------

    def get(
        self, name: str, *, subresource: str | None = None, resource_version: str | None = None
    ) -> ApiRequest:
        """A GET of one object (or its subresource), optionally at ``resource_version``."""
        query = (("resourceVersion", resource_version),) if resource_version is not None else ()
        return _built(
            "GET", self.object_path(name, subresource), query, target=self._target(name, subresource)
        )

    def list(
        self,
        *,
        label_selector: LabelSelectorLike | None = None,
        field_selector: FieldSelectorLike | None = None,
        selectors: Selectors | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        resource_version_match: ResourceVersionMatch | None = None,
        timeout_seconds: int | None = None,
    ) -> ApiRequest:
        """A LIST of the collection, with selectors, paging (``limit``, ``continue_``) and resourceVersion
        semantics.
        """
        if resource_version_match and resource_version is None:
            raise ValueError("resource_version_match needs resource_version")
        if continue_ and resource_version:
            raise ValueError("continue_ and resource_version are exclusive: the token pins the version")
        query = Selectors.merge(selectors, label_selector, field_selector).query()
        if limit is not None:
            if limit <= 0:
                raise ValueError(f"limit must be positive, got {limit}")
            query.append(("limit", str(limit)))
        if continue_:
            query.append(("continue", continue_))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        if resource_version_match:
            query.append(("resourceVersionMatch", resource_version_match))
        if timeout_seconds is not None:
            query.append(("timeoutSeconds", str(timeout_seconds)))
        return _built("GET", self._collection, tuple(query), target=self._target())

    def watch(
        self,
        *,
        name: str | None = None,
        label_selector: LabelSelectorLike | None = None,
        field_selector: FieldSelectorLike | None = None,
        selectors: Selectors | None = None,
        resource_version: str | None = None,
        resource_version_match: ResourceVersionMatch | None = None,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
        timeout_seconds: int | None = None,
    ) -> ApiRequest:
        """A watch on the collection (or one object, via a ``metadata.name`` field selector).

        ``send_initial_events`` asks for a streaming list: the current state as ADDED events,
        then a BOOKMARK annotated ``k8s.io/initial-events-end``. The server requires bookmarks
        and ``resourceVersionMatch=NotOlderThan`` for it, so both are set here.
        """
        if send_initial_events:
            allow_bookmarks = True
            resource_version_match = resource_version_match or "NotOlderThan"
        elif resource_version_match and resource_version is None:
            raise ValueError("resource_version_match needs resource_version (or send_initial_events)")
        selectors = Selectors.merge(selectors, label_selector, field_selector)
        if name is not None:
            _check_name(name, self.resource)
            selectors = selectors.with_name(name)
        query = [("watch", "true"), *selectors.query()]
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        if resource_version_match:
            query.append(("resourceVersionMatch", resource_version_match))
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if send_initial_events:
            query.append(("sendInitialEvents", "true"))
        if timeout_seconds is not None:
            query.append(("timeoutSeconds", str(timeout_seconds)))
        return _built("GET", self._collection, tuple(query), target=self._target(name), stream=True)

    # -- writes -------------------------------------------------------------------------------------

    def create(
        self,
        body: Any,
        *,
        subresource_of: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: FieldValidation | None = None,
    ) -> ApiRequest:
        """POST to the collection, or to ``<name>/<subresource>`` (e.g. ``pods/x/eviction``)."""
        if subresource_of is not None:
            path = self.object_path(subresource_of, subresource)
        else:
            if self.resource.namespaced and not self.namespace:
                raise ValueError(f"{self.resource.display_name} is namespaced: create needs a namespace")
            path = self._collection
        query = _write_query(dry_run, field_manager, field_validation)
        target = self._target(subresource_of or _body_name(body), subresource)
        return _built("POST", path, query, _encode(body), "application/json", target)

    def replace(
        self,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: FieldValidation | None = None,
    ) -> ApiRequest:
        """A PUT of ``body`` as the object (or its subresource): optimistic concurrency on its
        resourceVersion.
        """
        path = self.object_path(name, subresource)
        query = _write_query(dry_run, field_manager, field_validation)
        return _built("PUT", path, query, _encode(body), "application/json", self._target(name, subresource))

    def patch(
        self,
        name: str,
        body: Any,
        patch_type: PatchType = PatchType.MERGE,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: FieldValidation | None = None,
        force: bool = False,
    ) -> ApiRequest:
        """A PATCH of the object (or its subresource) with ``body`` of ``patch_type``; an apply patch needs
        ``field_manager``.
        """
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("server-side apply needs a field_manager (the name of the owner of the fields)")
        if force and patch_type is not PatchType.APPLY:
            raise ValueError("force is only meaningful for server-side apply (PatchType.APPLY)")
        if patch_type is PatchType.JSON and not isinstance(body, (bytes, Sequence)):
            raise ValueError("a JSON patch is a list of operations")
        path = self.object_path(name, subresource)
        query = list(_write_query(dry_run, field_manager, field_validation))
        if force:
            query.append(("force", "true"))
        return _built(
            "PATCH",
            path,
            tuple(query),
            _encode(body),
            patch_type.content_type,
            self._target(name, subresource),
        )

    def delete(
        self,
        name: str,
        *,
        propagation_policy: PropagationPolicy | None = None,
        grace_period_seconds: int | None = None,
        precondition_uid: str | None = None,
        precondition_resource_version: str | None = None,
        dry_run: bool = False,
    ) -> ApiRequest:
        """DELETE one object; preconditions make it fail with 409 Conflict if the object changed."""
        body = _delete_options(
            propagation_policy, grace_period_seconds, precondition_uid, precondition_resource_version, dry_run
        )
        query = (("dryRun", "All"),) if dry_run else ()
        return _built("DELETE", self.object_path(name), query, body, "application/json", self._target(name))

    def delete_collection(
        self,
        *,
        label_selector: LabelSelectorLike | None = None,
        field_selector: FieldSelectorLike | None = None,
        selectors: Selectors | None = None,
        propagation_policy: PropagationPolicy | None = None,
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
    ) -> ApiRequest:
        """A DELETE of every object of the collection the selectors match."""
        if self.resource.namespaced and not self.namespace:
            # The server supports this (all namespaces), but an unscoped delete_collection is far
            # too easy to issue by accident; ask for it explicitly with a cluster-scoped builder.
            raise ValueError(f"{self.resource.display_name}: delete_collection needs a namespace")
        query = Selectors.merge(selectors, label_selector, field_selector).query()
        if dry_run:
            query.append(("dryRun", "All"))
        body = _delete_options(propagation_policy, grace_period_seconds, None, None, dry_run)
        return _built("DELETE", self._collection, tuple(query), body, "application/json", self._target())


def _write_query(
    dry_run: bool, field_manager: str | None, field_validation: FieldValidation | None
) -> tuple[tuple[str, str], ...]:
    query: list[tuple[str, str]] = []
    if dry_run:
        query.append(("dryRun", "All"))
    if field_manager:
        query.append(("fieldManager", field_manager))
    if field_validation:
        query.append(("fieldValidation", field_validation))
    return tuple(query)


def _delete_options(
    propagation_policy: PropagationPolicy | None,
    grace_period_seconds: int | None,
    uid: str | None,
    resource_version: str | None,
    dry_run: bool,
) -> bytes:
    opts: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if propagation_policy:
        opts["propagationPolicy"] = propagation_policy
    if grace_period_seconds is not None:
        opts["gracePeriodSeconds"] = grace_period_seconds
    preconditions = {}
    if uid:
        preconditions["uid"] = uid
    if resource_version:
        preconditions["resourceVersion"] = resource_version
    if preconditions:
        opts["preconditions"] = preconditions
    if dry_run:
        opts["dryRun"] = ["All"]
    return orjson.dumps(opts)


def _body_name(body: Any) -> str | None:
    if isinstance(body, Mapping):
        meta = body.get("metadata")
        if isinstance(meta, Mapping):
            return meta.get("name") or meta.get("generateName")
    return None
