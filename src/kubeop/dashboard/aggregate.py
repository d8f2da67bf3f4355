"""The pages' data: what the recorder kept and the run's state, as JSON-ready dicts.

:func:`overview`, :func:`errors` and :func:`object_page` are what the dashboard's JSON endpoints
and its event stream send; they read the recorder, the cluster's cache and probe, and what the
Manager tells of this replica (:class:`Sources`). Reading only: nothing here writes to the
cluster (the object page lists the object's Events, a read).

Bounded whatever the run: the errors page lists at most ``_GROUPS`` errors of at most
``_GROUP_OBJECTS`` objects each (with how many more there are), and the text of Events and
conditions is redacted and cut as the recorder's errors are (:mod:`kubeop.dashboard.redact`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubeop.dashboard.recorder import ObjectKey, Recorder
from kubeop.dashboard.redact import redact, shown

if TYPE_CHECKING:
    from kubeop.cluster import Cluster

__all__ = ["Sources", "errors", "object_page", "overview"]

_TREE_NODES = 200
_TREE_DEPTH = 4
_EVENTS = 20
_RECENT = 60.0
_GROUPS = 100
_GROUP_OBJECTS = 100
_TEXT_CHARS = 1000


def _this_replica(controller: str, namespace: str, name: str) -> Mapping[str, Any]:
    """Without sharding every key is this replica's."""
    return {"replica": "this replica", "this_replica": True}


@dataclass
class Sources:
    """What the dashboard reads besides the recorder, given by the Manager: the run's cluster
    (None between runs), this replica's role (leader election, sharding), the webhooks served
    (a row each, with its ``path``; the overview adds the path's traffic to it), and who owns an
    object's key for a controller (``owner(controller, namespace, name)``: the shard ring's
    ``key``, ``ring``, ``generation``, the owning ``replica`` and ``this_replica``; without
    sharding, this replica)."""

    cluster: Callable[[], Cluster | None]
    replica: Callable[[], Mapping[str, Any]] = dict
    webhooks: Callable[[], Sequence[Mapping[str, Any]]] = list
    name: str = "operator"
    owner: Callable[[str, str, str], Mapping[str, Any]] = _this_replica


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def overview(recorder: Recorder, sources: Sources, now: float | None = None) -> dict[str, Any]:
    """The overview page: controllers, this replica, webhooks, cache, API server."""
    now = time.time() if now is None else now
    recorder.drain(now)
    controllers = []
    loads = recorder.journal.controllers
    for name in sorted(set(recorder.controllers) | set(loads)):
        stats = recorder.controllers.get(name)
        load = loads.get(name)
        recent = stats.ring.recent(now, _RECENT) if stats is not None else {}
        series = stats.ring.series(now) if stats is not None else {}
        controllers.append(
            {
                "name": name,
                "kind": stats.kind if stats is not None else load.kind if load is not None else "",
                "depth": load.depth() if load is not None else 0,
                "busy": load.busy() if load is not None else 0,
                "workers": load.workers if load is not None else 0,
                "adds_per_s": _round(recent.get("adds")),
                "reconciles_per_s": _round(recent.get("reconciles")),
                "error_rate": _round(recent.get("errors")),
                "p50": _round(recent.get("p50"), 6),
                "p99": _round(recent.get("p99"), 6),
                "failing": sum(1 for c, _ in recorder.failing if c == name),
                "spark": {
                    k: [None if v is None else round(v, 6) for v in values] for k, values in series.items()
                },
            }
        )
    cluster = sources.cluster()
    return {
        "name": sources.name,
        "time": now,
        "step": recorder.step,
        "controllers": controllers,
        "replica": dict(sources.replica()),
        "webhooks": [
            {
                **w,
                **{
                    k: _round(v, 6) if isinstance(v, float) else v
                    for k, v in recorder.webhooks.row(str(w.get("path", "")), now, _RECENT).items()
                },
            }
            for w in sources.webhooks()
        ],
        "cache": _cache(cluster),
        "api": _api(cluster),
        "failing": len(recorder.failing),
    }


def _cache(cluster: Cluster | None) -> list[dict[str, Any]]:
    if cluster is None:
        return []
    return sorted(
        (
            {"informer": informer.name, "objects": len(informer.store), "synced": informer.has_synced()}
            for informer in cluster.cache.informers
        ),
        key=lambda row: str(row["informer"]),
    )


def _api(cluster: Cluster | None) -> dict[str, Any]:
    if cluster is None:
        return {"server": "", "probe": "not running"}
    return {"server": redact(str(cluster.api.config.server)), "probe": cluster.probe.seen}


def errors(recorder: Recorder, now: float | None = None) -> dict[str, Any]:
    """The errors page: the objects failing now, grouped by error (the most objects first)."""
    now = time.time() if now is None else now
    recorder.drain(now)
    groups: dict[str, dict[str, Any]] = {}
    for failure in recorder.failing.values():
        group = groups.get(failure.error)
        if group is None:
            group = groups[failure.error] = {
                "error": failure.error,
                "traceback": failure.traceback,
                "objects": [],
                "more": 0,
            }
        if len(group["objects"]) >= _GROUP_OBJECTS:
            group["more"] += 1
            continue
        group["objects"].append(
            {
                "controller": failure.controller,
                "kind": failure.key.kind,
                "namespace": failure.key.namespace,
                "name": failure.key.name,
                "attempts": failure.attempts,
                "since": failure.since,
                "last": failure.last,
                "next_retry": failure.next_retry,
                "terminal": failure.terminal,
            }
        )
    ordered = sorted(groups.values(), key=lambda g: (-len(g["objects"]) - g["more"], g["error"]))
    return {
        "time": now,
        "groups": ordered[:_GROUPS],
        "more_groups": max(len(ordered) - _GROUPS, 0),
        "failing": len(recorder.failing),
    }


def _meta(obj: Any) -> Mapping[str, Any]:
    if isinstance(obj, Mapping):
        meta = obj.get("metadata")
        return meta if isinstance(meta, Mapping) else {}
    meta = getattr(obj, "metadata", None)
    if meta is None:
        return {}
    dump = getattr(meta, "model_dump", None)
    return dump(by_alias=True, exclude_none=True) if dump is not None else {}


def _plain(obj: Any) -> Mapping[str, Any]:
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    return dump(by_alias=True, exclude_none=True) if dump is not None else {}


def _kind_of(obj: Any, informer_name: str) -> str:
    kind = _plain(obj).get("kind")
    return str(kind) if kind else informer_name.split(" ")[0]


def _matches(kind: str, obj: Any, informer_name: str) -> bool:
    wanted = kind.lower()
    names = {_kind_of(obj, informer_name).lower(), informer_name.split(" ")[0].lower()}
    names |= {n.split(".")[0] for n in names}
    return wanted in names or wanted + "s" in names or wanted + "es" in names


async def object_page(
    recorder: Recorder, sources: Sources, kind: str, namespace: str, name: str, *, events: bool = True
) -> dict[str, Any]:
    """The object page: its last reconciles (with their log lines and writes), conditions,
    Events, owners and the objects it owns (from the cache), and per controller of its kind the
    shard and replica that own its key."""
    recorder.drain()
    reconciles = []
    for key, history in recorder.history.items():
        if key.namespace == namespace and key.name == name and _same_kind(key.kind, kind):
            for rec in reversed(history):
                reconciles.append(
                    {
                        **rec._asdict(),
                        "kind": key.kind,
                        "logs": [line._asdict() for line in recorder.log_lines(rec.reconcile_id)],
                    }
                )
    reconciles.sort(key=lambda r: -float(r["started"]))
    controllers = {str(r["controller"]) for r in reconciles}
    controllers |= {c for c, load in recorder.journal.controllers.items() if _same_kind(load.kind, kind)}
    cluster = sources.cluster()
    found = _find(cluster, kind, namespace, name) if cluster is not None else None
    page: dict[str, Any] = {
        "query": {"kind": kind, "namespace": namespace, "name": name},
        "found": found is not None,
        "reconciles": reconciles,
        "failing": [
            {"controller": f.controller, "error": f.error, "attempts": f.attempts, "next_retry": f.next_retry}
            for (_, key), f in recorder.failing.items()
            if key.namespace == namespace and key.name == name and _same_kind(key.kind, kind)
        ],
        "replica": dict(sources.replica()),
        "owner": [{"controller": c, **sources.owner(c, namespace, name)} for c in sorted(controllers)],
        "conditions": [],
        "owners": [],
        "owned": [],
        "events": [],
    }
    if found is None or cluster is None:
        return page
    obj, informer_name = found
    meta = _meta(obj)
    status = _plain(obj).get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    page["kind"] = _kind_of(obj, informer_name)
    page["uid"] = meta.get("uid")
    page["conditions"] = [
        {k: shown(v, _TEXT_CHARS) if isinstance(v, str) else v for k, v in c.items()}
        for c in conditions or ()
        if isinstance(c, Mapping)
    ]
    page["owners"] = [
        {"kind": o.get("kind"), "name": o.get("name"), "controller": bool(o.get("controller"))}
        for o in meta.get("ownerReferences") or ()
    ]
    page["owned"] = _owned(cluster, str(meta.get("uid") or ""))
    if events:
        page["events"] = await _events(cluster, namespace, name, str(meta.get("uid") or ""))
    return page


def _same_kind(recorded: str, wanted: str) -> bool:
    a, b = recorded.lower(), wanted.lower()
    return a == b or a + "s" == b or a + "es" == b or a == b.split(".")[0].rstrip("s")


def _find(cluster: Cluster, kind: str, namespace: str, name: str) -> tuple[Any, str] | None:
    key = f"{namespace}/{name}" if namespace else name
    for informer in cluster.cache.informers:
        obj = informer.store.get(key)
        if obj is not None and _matches(kind, obj, informer.name):
            return obj, informer.name
    return None


def _owned(cluster: Cluster, uid: str) -> list[dict[str, Any]]:
    """The objects owned by ``uid`` in the cache, as a tree (bounded: depth and nodes)."""
    if not uid:
        return []
    children: dict[str, list[tuple[Any, str]]] = {}
    for informer in cluster.cache.informers:
        for obj in informer.store.list():
            for ref in _meta(obj).get("ownerReferences") or ():
                owner = ref.get("uid") if isinstance(ref, Mapping) else None
                if owner:
                    children.setdefault(str(owner), []).append((obj, informer.name))
    budget = [_TREE_NODES]

    def tree(parent: str, depth: int) -> list[dict[str, Any]]:
        nodes = []
        for obj, informer_name in children.get(parent, ()):
            if budget[0] <= 0:
                break
            budget[0] -= 1
            meta = _meta(obj)
            child_uid = str(meta.get("uid") or "")
            nodes.append(
                {
                    "kind": _kind_of(obj, informer_name),
                    "namespace": meta.get("namespace") or "",
                    "name": meta.get("name"),
                    "owned": tree(child_uid, depth + 1) if depth < _TREE_DEPTH and child_uid else [],
                }
            )
        return nodes

    return tree(uid, 1)


async def _events(cluster: Cluster, namespace: str, name: str, uid: str) -> list[dict[str, Any]]:
    """The object's Events (the newest first), or one line saying why they could not be read."""
    try:
        async with asyncio.timeout(3):
            listed = await cluster.api.list(
                "events", namespace=namespace or None, field_selector=f"involvedObject.name={name}"
            )
    except Exception as exc:
        message = shown(f"events not read: {exc}", _TEXT_CHARS)
        return [{"type": "Unknown", "reason": "NotRead", "message": message, "count": 0}]
    rows = []
    for item in listed:
        event = _plain(item)
        involved = event.get("involvedObject") or {}
        if uid and involved.get("uid") not in (None, uid):
            continue
        rows.append(
            {
                "type": event.get("type"),
                "reason": event.get("reason"),
                "message": shown(str(event.get("message") or ""), _TEXT_CHARS),
                "count": event.get("count") or 1,
                "last": event.get("lastTimestamp") or event.get("eventTime") or "",
            }
        )
    rows.sort(key=lambda e: str(e["last"]), reverse=True)
    return rows[:_EVENTS]


def object_keys(recorder: Recorder, limit: int = 50) -> list[ObjectKey]:
    """The objects reconciled most recently (for the object page's suggestions)."""
    return list(reversed(list(recorder.history)))[:limit]
