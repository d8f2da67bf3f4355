"""Dependent: one child object a primary object needs, declared once and kept so by kubeop.

A dependent says what the child should be (``desired(primary, ctx)``, a model or a dict), when
it is ready (``ready(actual)``), how it is written and how it goes away::

    Dependent(Deployment, desired=web_deployment, ready=deployment_available)

A :class:`~kubeop.controller.workflow.Workflow` runs a primary's dependents in dependency order
(``depends_on``) and folds their states into the primary's status; this module holds the
declaration and what reconciling or deleting one dependent means:

- writing: compare before write through the reconciler client (``write="update"``, the default,
  or ``"patch"`` for a JSON merge patch), or server-side apply (``write="apply"`` with a field
  manager), which also compares first: no request when the object already holds what is desired.
- matching: the desired object's name (in the primary's namespace unless it names one), or a
  ``selector`` (labels, from the primary) that finds the object when ``desired`` leaves the
  name out.
- deletion: by owner reference (``deletion="owner"``, the default: the garbage collector
  removes the child with the primary), or by a finalizer on the primary (``"finalizer"``, for a
  cluster-scoped child or one in another namespace, which an owner reference cannot reach); the
  child then carries ``kubeop.io/owner-*`` annotations naming its primary.
- read-only (:meth:`Dependent.external`): an object the primary only observes; never written
  or deleted.

Every callable may be a plain function or a coroutine function.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kubeop.client import ResourceLike
from kubeop.controller.compare import contains, without_status
from kubeop.controller.ownership import set_controller_reference
from kubeop.controller.request import Request
from kubeop.core import meta as m
from kubeop.core.model import from_dict, is_model_class, to_dict
from kubeop.core.resource import ApiResource

if TYPE_CHECKING:
    from kubeop.controller.context import Context

__all__ = [
    "OWNER_NAMESPACE_ANNOTATION",
    "OWNER_NAME_ANNOTATION",
    "OWNER_UID_LABEL",
    "Dependent",
    "DependentState",
]

#: On a child deleted by finalizer: the uid of its primary (a label, so children can be selected).
OWNER_UID_LABEL = "kubeop.io/owner-uid"
#: On a child deleted by finalizer: its primary's name and namespace (what its events enqueue).
OWNER_NAME_ANNOTATION = "kubeop.io/owner-name"
OWNER_NAMESPACE_ANNOTATION = "kubeop.io/owner-namespace"

Write = Literal["update", "patch", "apply"]
Deletion = Literal["owner", "finalizer"]
Phase = Literal["ready", "progressing", "waiting", "failed", "deleting", "deleted"]

_WRITES = ("update", "patch", "apply")
_DELETIONS = ("owner", "finalizer")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$")


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, awaited when it returns an awaitable (sync and async callables alike)."""
    out = fn(*args)
    if type(out) is dict or type(out) is bool or out is None:  # the usual answers: no ABC check
        return out
    if inspect.isawaitable(out):
        out = await out
    return out


def _answer(dep: Dependent, what: str, out: Any, *, none: bool) -> bool:
    """``out`` as the answer of ``dep``'s ``what`` callable: a bool (None too when ``none``, as
    False). Anything else is a TypeError: a wrong return value must never count as ready, gone
    or unwanted."""
    if isinstance(out, bool):
        return out
    if out is None and none:
        return False
    raise TypeError(f"dependent {dep.name!r}: {what}() returned {_kind_of_value(out)}: return True or False")


async def reconcile_wanted(dep: Dependent, primary: Any, ctx: Any) -> bool:
    """The dependent's ``reconcile_precondition``: True or False, nothing else (a false one
    deletes the dependent, so None from a function that forgot to return is an error)."""
    if dep.reconcile_precondition is None:
        return True
    return _answer(
        dep, "reconcile_precondition", await _call(dep.reconcile_precondition, primary, ctx), none=False
    )


def failed_state(name: str, exc: BaseException) -> DependentState:
    """The state of dependent ``name`` that failed with ``exc``."""
    return DependentState(name, "failed", None, "", _error_text(exc), exc)


def _kind_of_value(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_.]", name) if part)


@dataclass(frozen=True, slots=True)
class Dependent:
    """One child of a primary object: what it should be, when it is ready, how it is written.

    ``desired(primary, ctx)`` returns the object (a model or a dict; apiVersion/kind may be left
    to ``kind``, the namespace to the primary's); ``ready(actual)`` says whether the object as
    the server has it is ready (default: it exists). The workflow options:

    - ``name``: the dependent's name in the workflow (default: the kind, lower case), which
      ``depends_on`` names and its status condition (``<Name>Ready``) is made of;
    - ``depends_on``: the dependents that must be ready before this one is reconciled;
    - ``reconcile_precondition(primary, ctx)``: when false, the dependent (and whatever depends on it)
      is deleted instead of reconciled;
    - ``ready_postcondition(primary, actual)``: readiness that needs the primary (and'ed with
      ``ready``);
    - ``delete_postcondition(primary, actual)``: a deleted dependent counts as gone only once
      this holds (``actual`` is the cached object, None once the cache saw it go); those it
      depends on are deleted after that.
    """

    kind: ResourceLike
    desired: Callable[[Any, Any], Any] | None = None
    ready: Callable[[Any], bool | Awaitable[bool]] | None = None
    name: str = ""
    depends_on: tuple[str, ...] | str | Iterable[str] = ()
    reconcile_precondition: Callable[[Any, Any], bool | Awaitable[bool]] | None = None
    ready_postcondition: Callable[[Any, Any], bool | Awaitable[bool]] | None = None
    delete_postcondition: Callable[[Any, Any], bool | Awaitable[bool]] | None = None
    selector: Callable[[Any], Mapping[str, str]] | None = None
    write: Write = "update"
    field_manager: str | None = None
    deletion: Deletion = "owner"
    read_only: bool = False
    condition: str = ""

    def __post_init__(self) -> None:
        name = self.name or _kind_text(self.kind).lower()
        if not _NAME.match(name):
            raise ValueError(
                f"dependent name {name!r} must be lower case letters, digits, '-', '_' or '.' "
                "(it names the dependent in depends_on and its status condition)"
            )
        object.__setattr__(self, "name", name)
        deps = self.depends_on
        object.__setattr__(self, "depends_on", (deps,) if isinstance(deps, str) else tuple(deps))
        if self.write not in _WRITES:
            raise ValueError(
                f"dependent {name!r}: write must be one of {', '.join(_WRITES)}, got {self.write!r}"
            )
        if self.deletion not in _DELETIONS:
            raise ValueError(
                f"dependent {name!r}: deletion must be one of {', '.join(_DELETIONS)}, got {self.deletion!r}"
            )
        if self.desired is None and not self.read_only:
            raise ValueError(
                f"dependent {name!r} has no desired(primary, ctx): give one, "
                "or declare an observed object with Dependent.external(...)"
            )
        if self.desired is not None and not callable(self.desired):
            raise TypeError(f"dependent {name!r}: desired must be a function (primary, ctx) -> object")
        object.__setattr__(self, "condition", self.condition or f"{_camel(name)}Ready")

    @classmethod
    def external(
        cls,
        kind: ResourceLike,
        *,
        name: str | Callable[[Any], str] | None = None,
        namespace: str | Callable[[Any], str | None] | None = None,
        selector: Callable[[Any], Mapping[str, str]] | None = None,
        ready: Callable[[Any], bool | Awaitable[bool]] | None = None,
        dependent_name: str = "",
        depends_on: tuple[str, ...] | str | Iterable[str] = (),
        ready_postcondition: Callable[[Any, Any], bool | Awaitable[bool]] | None = None,
    ) -> Dependent:
        """A read-only dependent: an object the primary needs but does not own (a Secret someone
        else makes, a cluster-scoped class). It is found by ``name`` (a string, or a function of
        the primary) or ``selector`` and observed, never written or deleted; it is ready when it
        exists and ``ready`` holds. Its events do not reach the controller unless it watches
        the kind itself (``.watches(kind, map_fn)``)."""
        if (name is None) == (selector is None):
            raise ValueError(
                f"Dependent.external({_kind_text(kind)}): give exactly one of name= or selector="
            )

        def identity(primary: Any, ctx: Any) -> dict[str, Any]:
            md: dict[str, Any] = {}
            if name is not None:
                md["name"] = name(primary) if callable(name) else name
            if namespace is not None:
                md["namespace"] = namespace(primary) if callable(namespace) else namespace
            return {"metadata": md}

        return cls(
            kind,
            identity,
            ready,
            name=dependent_name,
            depends_on=depends_on,
            ready_postcondition=ready_postcondition,
            selector=selector,
            read_only=True,
        )


@dataclass(slots=True)
class DependentState:
    """What one reconcile made of one dependent: its phase, the object as the server has it
    (``actual``: a model of the dependent's kind when that is a model class, else a dict; None
    when absent), what was done (``action``: created, updated, unchanged, observed, deleted or
    empty), and a message for its status condition."""

    name: str
    phase: Phase
    actual: Any = dataclasses.field(default=None, repr=False)  # may be a Secret: never in a repr
    action: str = ""
    message: str = ""
    error: BaseException | None = dataclasses.field(default=None, repr=False)

    @property
    def ready(self) -> bool:
        """The dependent exists and is ready."""
        return self.phase == "ready"


def _kind_text(kind: ResourceLike) -> str:
    if isinstance(kind, ApiResource):
        return kind.kind or kind.plural
    if isinstance(kind, type):
        return str(getattr(kind, "kind", None) or kind.__name__)
    return str(kind)


def _error_text(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _typed(dep: Dependent, obj: Any) -> Any:
    """``obj`` as the dependent's model when its kind is one (a dict otherwise)."""
    kind = dep.kind
    if obj is None or type(kind) is ApiResource or type(kind) is str:
        return obj
    if not isinstance(kind, type) or not is_model_class(kind):
        return obj
    return from_dict(kind, to_dict(obj))


async def _desired(
    dep: Dependent, res: ApiResource, primary: Any, primary_d: dict[str, Any], ctx: Context
) -> dict[str, Any]:
    """The desired object as a new dict, its kind, namespace and (for an owned one) its owner
    filled in; its name found by the selector when ``desired`` leaves it out."""
    assert dep.desired is not None
    made = await _call(dep.desired, primary, ctx)
    if made is None:
        raise ValueError(f"dependent {dep.name!r}: desired(primary, ctx) returned None, expected an object")
    want = dict(to_dict(made))
    want.setdefault("apiVersion", res.api_version)
    want.setdefault("kind", res.kind)
    if want["apiVersion"] != res.api_version or want["kind"] != res.kind:
        raise ValueError(
            f"dependent {dep.name!r}: desired() returned a {want['apiVersion']} {want['kind']}, but the "
            f"dependent is declared for {res.api_version} {res.kind}: declare a dependent of that kind"
        )
    meta = want.get("metadata")
    if meta is not None and not isinstance(meta, Mapping):
        raise TypeError(f"dependent {dep.name!r}: the desired object's metadata must be a mapping")
    md = want["metadata"] = dict(meta or {})
    for field in ("name", "namespace"):
        if md.get(field) is not None and not isinstance(md[field], str):
            raise TypeError(f"dependent {dep.name!r}: the desired object's metadata.{field} must be a string")
    if res.namespaced and not md.get("namespace"):
        md["namespace"] = m.namespace(primary_d) or None
    if not md.get("name") and dep.selector is not None:
        found = await _select(dep, res, primary, md.get("namespace"), ctx)
        if found is not None:
            md["name"] = m.name(found)
    if not md.get("name") and dep.selector is None:
        raise ValueError(
            f"dependent {dep.name!r}: the desired {res.kind} has no metadata.name "
            "(set it in desired(), or give a selector that finds the object)"
        )
    return want


async def _select(dep: Dependent, res: ApiResource, primary: Any, namespace: str | None, ctx: Context) -> Any:
    assert dep.selector is not None
    labels = dep.selector(primary)
    found = await ctx.client.list(res, namespace=namespace if res.namespaced else None, labels=labels)
    if len(found) > 1:
        names = ", ".join(sorted(m.name(o) for o in found))
        raise ValueError(
            f"dependent {dep.name!r}: the selector {dict(labels)} matches {len(found)} {res.kind} objects "
            f"({names}); it must match one"
        )
    return found[0] if found else None


def _own(dep: Dependent, res: ApiResource, want: dict[str, Any], primary_d: dict[str, Any]) -> None:
    """Mark ``want`` as the primary's: a controller reference, or the owner annotations."""
    md = want["metadata"]
    if dep.deletion == "owner":
        owner_ns = m.namespace(primary_d)
        if owner_ns and (not res.namespaced or md.get("namespace") != owner_ns):
            where = "cluster-scoped" if not res.namespaced else f"in namespace {md.get('namespace')!r}"
            raise ValueError(
                f"dependent {dep.name!r}: {primary_d.get('kind')} {owner_ns}/{m.name(primary_d)} cannot own "
                f"{res.kind} {md.get('name')!r} {where} by an owner reference; declare the dependent "
                "with deletion='finalizer'"
            )
        set_controller_reference(primary_d, want)
        return
    labels = md["labels"] = dict(md.get("labels") or {})
    labels[OWNER_UID_LABEL] = m.uid(primary_d)
    notes = md["annotations"] = dict(md.get("annotations") or {})
    notes[OWNER_NAME_ANNOTATION] = m.name(primary_d)
    if m.namespace(primary_d):
        notes[OWNER_NAMESPACE_ANNOTATION] = m.namespace(primary_d)


def _is_owned(dep: Dependent, obj: Mapping[str, Any], primary_d: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is the primary's to delete (its controller reference or owner label)."""
    uid = m.uid(primary_d)
    if dep.deletion == "finalizer":
        return bool(uid) and m.labels(obj).get(OWNER_UID_LABEL) == uid
    ref = m.controller_of(obj)
    return ref is not None and ref.get("uid") == uid


def _check_ours(
    dep: Dependent, res: ApiResource, want: Mapping[str, Any], current: Any, primary_d: Mapping[str, Any]
) -> None:
    """Refuse to write the primary itself, or an object another controller (or, for a dependent
    deleted by finalizer, another primary) has: taking it over would make two owners fight."""
    md = want["metadata"]
    if (
        want.get("kind") == primary_d.get("kind")
        and want.get("apiVersion") == primary_d.get("apiVersion")
        and md.get("name") == m.name(primary_d)
        and (md.get("namespace") or "") == m.namespace(primary_d)
    ):
        raise ValueError(f"dependent {dep.name!r}: the desired {res.kind} is the primary itself")
    if current is None:
        return
    obj = to_dict(current)
    uid = m.uid(primary_d)
    where = f"{res.kind} {md.get('name')!r}"
    if dep.deletion == "finalizer":
        holder = m.labels(obj).get(OWNER_UID_LABEL)
        if holder and holder != uid:
            raise ValueError(
                f"dependent {dep.name!r}: {where} belongs to another primary (label {OWNER_UID_LABEL}); "
                "give the dependent a name of its own"
            )
        return
    ref = m.controller_of(obj)
    if ref is not None and ref.get("uid") != uid:
        raise ValueError(
            f"dependent {dep.name!r}: {where} is controlled by {ref.get('kind')} {ref.get('name')}, "
            "not by this primary; give the dependent a name of its own"
        )


async def _is_ready(dep: Dependent, primary: Any, actual: Any) -> bool:
    if dep.ready is not None and not _answer(dep, "ready", await _call(dep.ready, actual), none=True):
        return False
    if dep.ready_postcondition is None:
        return True
    out = await _call(dep.ready_postcondition, primary, actual)
    return _answer(dep, "ready_postcondition", out, none=True)


async def reconcile_dependent(
    dep: Dependent,
    primary: Any,
    primary_d: dict[str, Any],
    ctx: Context,
    claims: dict[tuple[str, str, str, str], str] | None = None,
) -> DependentState:
    """Make one dependent what its ``desired`` says (or observe it, when read-only) and tell
    whether it is ready. Errors are the state's, not raised. ``claims`` (shared by the
    dependents of one run) refuses a second dependent writing an object another one writes."""
    client = ctx.client
    try:
        res = await client.resource(dep.kind)
        want = await _desired(dep, res, primary, primary_d, ctx)
        md = want["metadata"]
        name, namespace = md.get("name"), md.get("namespace")
        if dep.read_only:
            found = await client.get(res, name, namespace=namespace) if name else None
            if found is None:
                what = name or f"matching {dict(dep.selector(primary)) if dep.selector else {}}"
                return DependentState(
                    dep.name, "progressing", None, "", f"waiting for {res.kind} {what} to exist"
                )
            actual = _typed(dep, found)
            action = "observed"
        else:
            if not name:  # a selector found nothing and desired gave no name
                raise ValueError(
                    f"dependent {dep.name!r}: no {res.kind} matches the selector and desired() gives no name "
                    "to create one by"
                )
            if claims is not None:
                holder = claims.setdefault((res.group, res.plural, namespace or "", name), dep.name)
                if holder != dep.name:
                    where = f"{namespace}/{name}" if namespace else name
                    raise ValueError(
                        f"dependents {holder!r} and {dep.name!r} both desire {res.kind} {where}: "
                        "give each its own object"
                    )
            current = await client.get(res, name, namespace=namespace)
            _check_ours(dep, res, want, current, primary_d)
            _own(dep, res, want, primary_d)
            action, out = await _write(dep, res, want, current, ctx)
            actual = _typed(dep, out)
            if m.is_being_deleted(to_dict(out)):  # made again once gone (its delete event)
                return DependentState(
                    dep.name, "progressing", actual, action, f"{res.kind} {name} is being deleted"
                )
        if await _is_ready(dep, primary, actual):
            return DependentState(dep.name, "ready", actual, action, f"{res.kind} {name} is ready")
        return DependentState(
            dep.name, "progressing", actual, action, f"waiting for {res.kind} {name} to be ready"
        )
    except Exception as exc:  # the workflow reports it in the status, then raises
        return DependentState(dep.name, "failed", None, "", _error_text(exc), exc)


async def _write(
    dep: Dependent, res: ApiResource, want: dict[str, Any], current: Any, ctx: Context
) -> tuple[str, Any]:
    client = ctx.client
    if dep.write == "update":
        return await client.create_or_update(want)
    if dep.write == "patch":
        return await client.create_or_patch(want)
    if current is not None and contains(current, without_status(want)):
        return "unchanged", current
    out = await client.apply(want, field_manager=dep.field_manager or client.field_manager)
    return ("created" if current is None else "updated"), out


async def delete_dependent(
    dep: Dependent, primary: Any, primary_d: dict[str, Any], ctx: Context
) -> DependentState:
    """Delete one dependent if it is the primary's, and tell whether it is gone (its
    ``delete_postcondition``, when it has one). A read-only dependent is left alone."""
    if dep.read_only:
        return DependentState(dep.name, "deleted", None, "", "observed only: left alone")
    client = ctx.client
    try:
        res = await client.resource(dep.kind)
        want = await _desired(dep, res, primary, primary_d, ctx)
        md = want["metadata"]
        name, namespace = md.get("name"), md.get("namespace")
        current = await client.get(res, name, namespace=namespace) if name else None
        action = ""
        if current is not None and _is_owned(dep, to_dict(current), primary_d):
            if not m.is_being_deleted(to_dict(current)):
                await client.delete(res, name, namespace=namespace)
                action = "deleted"
        else:
            current = None  # absent, or someone else's: nothing to wait for
        if dep.delete_postcondition is not None and not _answer(
            dep,
            "delete_postcondition",
            await _call(dep.delete_postcondition, primary, _typed(dep, current)),
            none=True,
        ):
            return DependentState(dep.name, "deleting", None, action, f"waiting for {res.kind} {name} to go")
        return DependentState(dep.name, "deleted", None, action, f"{res.kind} {name} deleted")
    except Exception as exc:  # the workflow reports it in the status, then raises
        return DependentState(dep.name, "failed", None, "", _error_text(exc), exc)


def owner_request(obj: Mapping[str, Any]) -> list[Request]:
    """The request of the primary a child deleted by finalizer names in its annotations (none
    for an object without them): what the child's events enqueue."""
    notes = m.annotations(obj)
    name = notes.get(OWNER_NAME_ANNOTATION)
    if not name:
        return []
    return [Request(notes.get(OWNER_NAMESPACE_ANNOTATION) or "", name)]
