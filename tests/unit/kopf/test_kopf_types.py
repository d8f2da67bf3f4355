"""kopf's type names, enums, records and small helpers in kubeop.kopf: what kopf 1.45.2 defines them
as (its aliases, its enum values, its exception hierarchy), so that annotations and checks written
against kopf keep their meaning."""

from __future__ import annotations

import logging
import typing
from collections.abc import Mapping
from typing import Any

import pytest

import kubeop.kopf as kopf


def test_type_aliases_are_kopfs() -> None:
    assert kopf.Labels == Mapping[str, str] and kopf.Annotations == Mapping[str, str]
    assert kopf.FieldPath == tuple[str, ...]
    assert set(typing.get_args(kopf.FieldSpec)) >= {str, tuple[str, ...], list[str], type(None)}
    assert set(typing.get_args(kopf.Operation)) == {"CREATE", "UPDATE", "DELETE", "CONNECT"}
    assert set(typing.get_args(kopf.RawEventType)) == {None, "ADDED", "MODIFIED", "DELETED", "BOOKMARK"}
    assert kopf.HandlerId("create_fn") == "create_fn"
    for record in (
        kopf.BodyEssence,
        kopf.RawBody,
        kopf.ObjectReference,
        kopf.OwnerReference,
        kopf.UserInfo,
        kopf.WebhookClientConfigService,
        kopf.ProgressRecord,
    ):
        assert isinstance(record(), dict), record  # kopf's TypedDicts: plain dicts at run time
    assert callable(kopf.WebhookFn) and kopf.PatchFn is not None and kopf.WebhookServerProtocol is not None


def test_enums_have_kopfs_values() -> None:
    assert [str(op) for op in kopf.DiffOperation] == ["add", "change", "remove"]
    assert {"create", "update", "delete", "resume"} <= {str(r) for r in kopf.Reason}
    assert kopf.Reason.CREATE == "create"
    names = {r.name for r in kopf.DaemonStoppingReason}
    assert names == {
        "DONE",
        "FILTERS_MISMATCH",
        "RESOURCE_DELETED",
        "OPERATOR_PAUSING",
        "OPERATOR_EXITING",
        "DAEMON_SIGNALLED",
        "DAEMON_CANCELLED",
        "DAEMON_ABANDONED",
    }
    assert {f.name for f in kopf.LogFormat} == {"PLAIN", "FULL", "JSON"}


def test_diff_items_unpack_as_kopfs() -> None:
    diff: kopf.Diff = (kopf.DiffItem(kopf.DiffOperation.CHANGE, ("spec", "size"), "1G", "2G"),)
    ((op, field, old, new),) = diff
    assert (op, field, old, new) == ("change", ("spec", "size"), "1G", "2G")


def test_handler_errors_are_permanent_errors_as_in_kopf() -> None:
    assert issubclass(kopf.HandlerTimeoutError, kopf.PermanentError)
    assert issubclass(kopf.HandlerRetriesError, kopf.PermanentError)


def test_memo_meta_and_store() -> None:
    memo = kopf.Memo()
    memo.counter = 1
    assert memo["counter"] == 1 and memo.counter == 1
    with pytest.raises(AttributeError):
        _ = memo.missing
    body = kopf.Body({"metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {}})
    meta: kopf.Meta = body.meta
    assert meta.name == "n" and meta.labels == {"a": "b"}
    store: kopf.Store[str] = kopf.Store()
    assert not store and list(store) == [] and len(store) == 0


def test_daemon_stopper_checkers_are_the_stopped_flags() -> None:
    sync, async_ = kopf.SyncDaemonStopperChecker(), kopf.AsyncDaemonStopperChecker()
    for stopped in (sync, async_):
        assert isinstance(stopped, kopf.DaemonStopped) and not stopped
    sync.set()
    assert sync and sync.wait(0.01)


def test_default_registry_is_replaceable() -> None:
    before = kopf.get_default_registry()
    fresh = kopf.OperatorRegistry()
    kopf.set_default_registry(fresh)
    try:

        @kopf.on.create("kopfexamples.kopf.dev")
        def fn(**_: Any) -> None: ...

        assert kopf.get_default_registry() is fresh and len(fresh) == 1
    finally:
        kopf.set_default_registry(before)
    assert len(fresh) == 1 and kopf.get_default_registry() is before


def test_configure_sets_the_root_level(caplog: pytest.LogCaptureFixture) -> None:
    root = logging.getLogger()
    level = root.level
    try:
        kopf.configure(verbose=True, log_format=kopf.LogFormat.JSON)
        assert root.level == logging.DEBUG
        kopf.configure(quiet=True)
        assert root.level == logging.WARNING
    finally:
        for handler in [h for h in root.handlers if getattr(h, "_kopf_configured", False)]:
            root.removeHandler(handler)
        root.setLevel(level)


def test_run_fails_as_kopf_when_a_startup_handler_fails_for_good() -> None:
    reg = kopf.OperatorRegistry()

    @kopf.on.startup(registry=reg)
    def broken(**_: Any) -> None:
        raise kopf.PermanentError("no")

    with pytest.raises(kopf.ActivityError):
        kopf.run(registry=reg)


def test_login_via_async_client_is_none_without_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "kubernetes_asyncio", None)  # as if not installed
    result = kopf.login_via_async_client(logger=logging.getLogger("test"))
    import asyncio

    assert asyncio.run(result) is None
