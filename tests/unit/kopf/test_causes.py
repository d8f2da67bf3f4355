"""Pure parts of kubeop.kopf: essences, diffs, causes, filters, the recorded state, decorators."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import orjson
import pytest

import kubeop.kopf as kopf
from kubeop.kopf.diffs import DiffItem, diff, essence, parse_field, reduce
from kubeop.kopf.handlers import ChangingHandler, Reason, detect_cause, matches, prematches, selected
from kubeop.kopf.registry import handler_id, resource_name
from kubeop.kopf.settings import PersistenceSettings
from kubeop.kopf.state import LEGACY_ANNOTATION as ANNOTATION
from kubeop.kopf.state import LEGACY_STATUS_FIELD as STATUS_FIELD
from kubeop.kopf.state import Progress, State, storages_of

FIN = kopf.FINALIZER


def obj(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "kopf.dev/v1",
        "kind": "KopfExample",
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
            "generation": 2,
            "labels": {"app": "x"},
            "annotations": {
                "note": "keep",
                ANNOTATION: "{}",
                "kopf.zalando.org/last-handled-configuration": "{}",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
            },
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"field": "v1", "items": [1, 2]},
        "status": {"phase": "Running"},
    }
    body.update(over)
    return body


def test_essence_keeps_spec_labels_user_annotations_and_drops_bookkeeping() -> None:
    e = essence(obj())
    assert e == {
        "spec": {"field": "v1", "items": [1, 2]},
        "metadata": {"labels": {"app": "x"}, "annotations": {"note": "keep"}},
    }


def test_essence_keeps_extra_fields_from_status() -> None:
    assert essence(obj(), [("status", "phase")])["status"] == {"phase": "Running"}
    assert "status" not in essence(obj(), [("status", "absent")])


def test_status_or_resource_version_changes_are_no_change() -> None:
    a, b = obj(), obj(status={"phase": "Failed"})
    b["metadata"] = dict(b["metadata"], resourceVersion="9", generation=3)
    assert diff(essence(a), essence(b)) == ()


def test_diff_is_kopfs_format() -> None:
    old = {"spec": {"a": 1, "b": {"c": 2}, "l": [1]}}
    new = {"spec": {"b": {"c": 3}, "l": [1, 2], "d": "x"}}
    assert diff(old, new) == (
        DiffItem("remove", ("spec", "a"), 1, None),
        DiffItem("change", ("spec", "b", "c"), 2, 3),
        DiffItem("add", ("spec", "d"), None, "x"),
        DiffItem("change", ("spec", "l"), [1], [1, 2]),
    )
    assert diff(None, {"spec": {}}) == (("add", (), None, {"spec": {}}),)
    assert diff({"a": 1}, {"a": 1}) == ()


def test_reduce_narrows_to_a_field_both_below_and_above() -> None:
    d = diff({"spec": {"a": 1, "b": 2}}, {"spec": {"a": 5, "b": 2}})
    assert reduce(d, ("spec", "a")) == (("change", (), 1, 5),)
    assert reduce(d, ("spec", "b")) == ()
    created = diff(None, {"spec": {"a": 1}})
    assert reduce(created, ("spec", "a")) == (("add", (), None, 1),)


@pytest.mark.parametrize("bad", ["spec..x", "spec.", ".spec"])
def test_parse_field_refuses_empty_parts(bad: str) -> None:
    assert parse_field("") == parse_field(None) == ()
    assert parse_field(["spec", "x"]) == parse_field("spec.x") == ("spec", "x")
    with pytest.raises(ValueError, match="empty part"):
        parse_field(bad)


def test_causes() -> None:
    body = obj()
    e = essence(body)
    assert detect_cause(body, finalizer=FIN, old=None, diff=diff(None, e), initial=False) is Reason.CREATE
    assert detect_cause(body, finalizer=FIN, old=None, diff=diff(None, e), initial=True) is Reason.CREATE
    assert detect_cause(body, finalizer=FIN, old=e, diff=(), initial=True) is Reason.RESUME
    assert detect_cause(body, finalizer=FIN, old=e, diff=(), initial=False) is Reason.NOOP
    d = diff({"spec": {}}, e)
    assert detect_cause(body, finalizer=FIN, old={"spec": {}}, diff=d, initial=False) is Reason.UPDATE
    deleting = obj()
    deleting["metadata"] = dict(deleting["metadata"], deletionTimestamp="2026-01-01T00:00:00Z")
    assert detect_cause(deleting, finalizer=FIN, old=e, diff=(), initial=False) is Reason.FREE
    deleting["metadata"]["finalizers"] = [FIN]
    assert detect_cause(deleting, finalizer=FIN, old=e, diff=(), initial=False) is Reason.DELETE


def h(**kw: Any) -> ChangingHandler:
    base: dict[str, Any] = {"fn": print, "id": "h", "resource": "r", "reason": Reason.UPDATE}
    base.update(kw)
    return ChangingHandler(**base)


def test_resume_handlers_join_first_causes_but_not_deletion() -> None:
    resume = h(reason=None, initial=True)
    assert selected(resume, Reason.RESUME, initial=True)
    assert selected(resume, Reason.UPDATE, initial=True)
    assert not selected(resume, Reason.UPDATE, initial=False)
    assert not selected(resume, Reason.DELETE, initial=True)
    assert selected(h(reason=None, initial=True, deleted=True), Reason.DELETE, initial=True)
    assert not selected(h(reason=Reason.CREATE), Reason.UPDATE, initial=False)
    assert not selected(h(reason=None, field=("spec",)), Reason.RESUME, initial=True)


def test_field_value_and_change_filters() -> None:
    body = obj()
    old, new = {"spec": {"field": "a"}}, {"spec": {"field": "b"}}
    fld = ("spec", "field")
    assert matches(h(field=fld, field_needs_change=True), body, old, new, {})
    assert not matches(h(field=fld, field_needs_change=True), body, new, new, {})
    assert not matches(h(field=("spec", "other")), body, old, new, {})
    assert matches(h(field=fld, value="b"), body, old, new, {})
    assert matches(h(field=fld, value="a"), body, old, new, {})  # old or new, as kopf
    assert not matches(h(field=fld, value="c"), body, old, new, {})
    assert matches(h(field=fld, old="a", new="b"), body, old, new, {})
    assert not matches(h(field=fld, old="b"), body, old, new, {})
    assert matches(h(field=fld, old=kopf.ABSENT, new=kopf.PRESENT), body, {}, new, {})
    assert matches(h(field=fld, new=lambda v, **_: v == "b"), body, old, new, {})


def test_label_annotation_and_when_filters() -> None:
    body = obj()
    kw = {"spec": body["spec"]}
    assert prematches(h(labels={"app": "x"}), body, kw)
    assert not prematches(h(labels={"app": "y"}), body, kw)
    assert prematches(h(labels={"app": kopf.PRESENT, "other": kopf.ABSENT}), body, kw)
    assert prematches(h(labels={"app": None}), body, kw)
    assert not prematches(h(labels={"other": kopf.PRESENT}), body, kw)
    assert prematches(h(annotations={"note": lambda v, **_: v == "keep"}), body, kw)
    assert prematches(h(when=lambda spec, **_: spec["field"] == "v1"), body, kw)
    assert not prematches(h(when=lambda spec, **_: False), body, kw)


def _legacy(seq: int, essence: Any, progress: Any = None) -> str:
    """The record of kubeop.kopf before it kept kopf's formats (read, never written now)."""
    doc = {"seq": seq, "essence": essence, **({"progress": progress} if progress else {})}
    return orjson.dumps(doc).decode()


def _state_of(body: Any) -> State:
    return State.of(body, storages_of(PersistenceSettings()), ["h"], now=0.0)


def test_state_round_trip_and_newest_copy_wins() -> None:
    body = obj()
    del body["metadata"]["annotations"]["kopf.zalando.org/last-handled-configuration"]
    body["metadata"]["annotations"][ANNOTATION] = _legacy(1, {"old": 1})
    body["status"][STATUS_FIELD] = _legacy(
        2, {"new": 1}, {"h": {"p": "create", "s": 10.0, "r": 2, "d": 20.0}}
    )
    again = _state_of(body)
    assert again.essence == {"new": 1}
    assert again.progress == {"h": Progress("create", 10.0, retries=2, delayed=20.0)}
    body["status"][STATUS_FIELD] = "not json"
    assert _state_of(body).essence == {"old": 1}
    assert _state_of({"metadata": {}}).essence is None and not _state_of({"metadata": {}}).progress


def test_handler_ids_are_kopfs() -> None:
    def create_fn() -> None: ...

    assert handler_id(create_fn, None, ()) == "test_handler_ids_are_kopfs.<locals>.create_fn"
    assert handler_id(create_fn, "mine", ("spec", "x")) == "mine/spec.x"
    assert handler_id(functools.partial(create_fn), "x", ()) == "x"
    assert handler_id(lambda: None, None, ()).startswith("lambda:")


def test_resource_names() -> None:
    assert resource_name(("kopfexamples",)) == "kopfexamples"
    assert resource_name(("kopf.dev", "v1", "kopfexamples")) == "kopfexamples.v1.kopf.dev"
    assert resource_name(("kopf.dev", "kopfexamples")) == "kopfexamples.kopf.dev"
    assert resource_name(("kopf.dev/v1", "kopfexamples")) == "kopfexamples.v1.kopf.dev"
    assert resource_name((), group="", version="v1", plural="pods") == "pods.v1."
    with pytest.raises(TypeError, match="name the resource"):
        resource_name(())


def test_decorators_register_with_kopfs_semantics() -> None:
    reg = kopf.Registry()

    @kopf.on.create("kopfexamples.kopf.dev", registry=reg)
    @kopf.on.update("kopfexamples.kopf.dev", registry=reg, field="spec.field", old="a")
    def fn(**_: Any) -> None: ...

    @kopf.on.delete("kopfexamples.kopf.dev", registry=reg)
    def gone(**_: Any) -> None: ...

    @kopf.on.delete("kopfexamples.kopf.dev", registry=reg, optional=True, id="opt")
    def gone2(**_: Any) -> None: ...

    @kopf.on.field("kopfexamples.kopf.dev", field="spec.x", registry=reg)
    def x(**_: Any) -> None: ...

    handlers = {(hh.id.split("<locals>.")[-1], hh.reason): hh for hh in reg.changing("kopfexamples.kopf.dev")}
    assert handlers[("fn/spec.field", Reason.UPDATE)].old == "a"
    assert handlers[("fn/spec.field", Reason.UPDATE)].field_needs_change
    assert handlers[("fn", Reason.CREATE)].field == ()
    assert handlers[("gone", Reason.DELETE)].requires_finalizer
    assert not handlers[("opt", Reason.DELETE)].requires_finalizer
    assert handlers[("x/spec.x", None)].field == ("spec", "x")


def test_bad_decorator_input_names_the_handler() -> None:
    reg = kopf.Registry()
    with pytest.raises(TypeError, match=r"on\.create of .*oops'.*unknown argument\(s\) fiedl"):

        @kopf.on.create("r", registry=reg, fiedl="spec.x")
        def oops(**_: Any) -> None: ...

    with pytest.raises(ValueError, match=r"bad'.*empty part"):

        @kopf.on.update("r", registry=reg, field="spec..x")
        def bad(**_: Any) -> None: ...

    with pytest.raises(TypeError, match=r"nofield'.*value= filters a field"):

        @kopf.on.update("r", registry=reg, value=1)
        def nofield(**_: Any) -> None: ...

    with pytest.raises(ValueError, match=r"neg'.*retries="):

        @kopf.on.create("r", registry=reg, retries=-1)
        def neg(**_: Any) -> None: ...

    @kopf.on.create("r", registry=reg)
    def twice(**_: Any) -> None: ...

    with pytest.raises(ValueError, match="registered twice"):
        kopf.on.create("r", registry=reg)(twice)


def test_adopt_sets_owner_namespace_and_name_prefix() -> None:
    owner = obj()
    child: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {}}
    kopf.adopt(child, owner=owner)
    md = child["metadata"]
    assert md["generateName"] == "a-" and "name" not in md
    assert md["namespace"] == "ns"
    assert md["labels"] == {"app": "x"}
    (ref,) = md["ownerReferences"]
    assert ref["uid"] == "u1" and ref["controller"] is True and ref["blockOwnerDeletion"] is True
    named: dict[str, Any] = {"metadata": {"name": "fixed"}}
    kopf.adopt([named], owner=owner)
    assert named["metadata"]["name"] == "fixed"
    with pytest.raises(LookupError, match="owner"):
        kopf.adopt({"metadata": {}})


def test_patch_stanzas() -> None:
    p = kopf.Patch()
    p.status["x"] = 1
    p.metadata.labels["a"] = "b"
    p.spec["y"] = None
    assert p == {"status": {"x": 1}, "metadata": {"labels": {"a": "b"}}, "spec": {"y": None}}
    body = kopf.Body(obj())
    assert body.meta.name == "a" and body.spec["field"] == "v1" and body.status["phase"] == "Running"
    assert body.metadata.labels == {"app": "x"}


def test_daemon_and_timer_decorators() -> None:
    reg = kopf.Registry()

    @kopf.daemon("r", registry=reg, cancellation_timeout=1.5, cancellation_polling=5)
    def d(**_: Any) -> None: ...

    @kopf.timer("r", registry=reg, interval=2, idle=5, initial_delay=1)
    async def t(**_: Any) -> None: ...

    daemons = {h.id.split("<locals>.")[-1]: h for h in reg.spawning("r")}
    assert daemons["d"].kind == "daemon" and daemons["d"].cancellation_timeout == 1.5
    assert str(daemons["d"]).startswith("Daemon '") and str(daemons["t"]).startswith("Timer '")
    assert (daemons["t"].interval, daemons["t"].idle, daemons["t"].initial_delay) == (2, 5, 1)
    assert reg.resources() == ["r"] and len(reg) == 2
    with pytest.raises(TypeError, match="interval="):
        kopf.timer("r", registry=reg)
    with pytest.raises(ValueError, match=r"neg'.*idle= is seconds"):

        @kopf.timer("r", registry=reg, interval=1, idle=-1)
        def neg(**_: Any) -> None: ...

    with pytest.raises(TypeError, match=r"bad'.*unknown argument\(s\) interval"):

        @kopf.daemon("r", registry=reg, interval=1)
        def bad(**_: Any) -> None: ...


def test_daemon_stopped_flags() -> None:
    from kubeop.kopf.spawning import AsyncDaemonStopped, SyncDaemonStopped

    sync = SyncDaemonStopped()
    assert not sync and not sync.wait(0.01)
    sync.set()
    assert sync and sync.wait(10)
    flag = AsyncDaemonStopped()
    assert not asyncio.run(flag.wait(0.05))
    flag.set()
    assert asyncio.run(flag.wait(10))


def test_event_decorator() -> None:
    reg = kopf.Registry()

    @kopf.on.event("pods", registry=reg, labels={"app": kopf.PRESENT})
    def seen(**_: Any) -> None: ...

    assert reg.resources() == ["pods"] and len(reg) == 1
    (h,) = reg.watching("pods")
    assert h.labels == {"app": kopf.PRESENT} and str(h).startswith("Handler '")
    with pytest.raises(TypeError, match=r"unknown argument\(s\) retries"):
        kopf.on.event("pods", registry=reg, retries=1)(seen)
