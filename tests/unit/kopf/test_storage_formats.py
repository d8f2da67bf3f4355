"""kopf's progress and diff-base storages write what kopf 1.45.2 writes, byte for byte.

Every expected value below was produced by kopf 1.45.2 itself (its sdist, installed as
tests/e2e/kopf/test_kopf_continuity.py installs it) running the same call; each test names the
kopf file and function it mirrors.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.kopf.state import Progress

LONG_ID = "update_fn/spec.template.spec.containers.resources.limits.memory.and.more"
RECORD: kopf.ProgressRecord = {
    "started": "2026-11-27T10:00:00.000000+00:00",
    "stopped": None,
    "delayed": "2026-11-27T10:00:05.500000+00:00",
    "purpose": "create",
    "retries": 1,
    "success": False,
    "failure": False,
    "message": "not yet",
    "subrefs": None,
}
COMPACT = (
    '{"started":"2026-11-27T10:00:00.000000+00:00","delayed":"2026-11-27T10:00:05.500000+00:00",'
    '"purpose":"create","retries":1,"success":false,"failure":false,"message":"not yet"}'
)
EMPTY: dict[str, Any] = {"metadata": {"annotations": {}}}


def test_annotation_names_as_kopf_forms_them() -> None:
    """kopf/_cogs/configs/conventions.py: StorageKeyFormingConvention.make_keys (v1 and v2 keys,
    blake2b suffixes), CollisionEvadingConvention.mark_key (-ofDRS)."""
    a = kopf.AnnotationsProgressStorage()
    assert a.make_keys("create_fn") == ["kopf.zalando.org/create_fn"]
    assert a.make_keys("parent/child<x>") == ["kopf.zalando.org/parent.child_x_"]
    assert a.make_keys(LONG_ID) == [
        "kopf.zalando.org/update_fn.spec.template.spec.containers.resources.limits-yxd8mw",
        "kopf.zalando.org/update_fn.spec.template.spec.containers-f9c57w",
    ]
    custom = kopf.AnnotationsProgressStorage(prefix="my-op.example.com", v1=False)
    assert custom.make_keys(LONG_ID) == [
        "my-op.example.com/update_fn.spec.template.spec.containers.resources.limits-yxd8mw"
    ]
    rs = {"kind": "ReplicaSet", "metadata": {"ownerReferences": [{"kind": "Deployment"}]}}
    assert a.make_keys("create_fn", body=rs) == ["kopf.zalando.org/create_fn-ofDRS"]
    with pytest.raises(ValueError, match="must be prefixed"):
        kopf.AnnotationsProgressStorage(prefix="")


def test_annotations_progress_storage() -> None:
    """kopf/_cogs/configs/progress.py: AnnotationsProgressStorage.store/fetch/purge/touch."""
    patch: dict[str, Any] = {}
    kopf.AnnotationsProgressStorage().store(key="b", record=RECORD, body=EMPTY, patch=patch)
    assert patch == {"metadata": {"annotations": {"kopf.zalando.org/b": COMPACT}}}
    patch = {}
    custom = kopf.AnnotationsProgressStorage(prefix="my-op.example.com")
    custom.store(key="b", record=RECORD, body=EMPTY, patch=patch)
    assert patch == {
        "metadata": {"annotations": {"my-op.example.com/b": COMPACT, "my-op.example.com/kopf-managed": "yes"}}
    }
    patch = {}
    kopf.AnnotationsProgressStorage(verbose=True).store(key="b", record=RECORD, body=EMPTY, patch=patch)
    assert patch["metadata"]["annotations"]["kopf.zalando.org/b"] == (
        '{"started":"2026-11-27T10:00:00.000000+00:00","stopped":null,'
        '"delayed":"2026-11-27T10:00:05.500000+00:00","purpose":"create","retries":1,"success":false,'
        '"failure":false,"message":"not yet","subrefs":null}'
    )
    body = {"metadata": {"annotations": {"kopf.zalando.org/a": "{}", "kopf.zalando.org/c": COMPACT}}}
    assert kopf.AnnotationsProgressStorage().fetch(key="c", body=body) == {
        k: v for k, v in RECORD.items() if v is not None
    }
    patch = {"metadata": {"annotations": {"kopf.zalando.org/b": "x"}}}
    a = kopf.AnnotationsProgressStorage()
    a.purge(key="a", body=body, patch=patch)  # on the object: nulled
    a.purge(key="b", body=body, patch=patch)  # only in this patch: dropped from it
    assert patch == {"metadata": {"annotations": {"kopf.zalando.org/a": None}}}
    patch = {}
    a.touch(
        body={"metadata": {"annotations": {"kopf.zalando.org/touch-dummy": "x"}}}, patch=patch, value=None
    )
    assert patch == {"metadata": {"annotations": {"kopf.zalando.org/touch-dummy": None}}}


def test_status_and_smart_progress_storages() -> None:
    """kopf/_cogs/configs/progress.py: StatusProgressStorage.store, SmartProgressStorage (writes the
    annotations only, reads status.kopf.progress too, purges both)."""
    patch: dict[str, Any] = {}
    kopf.StatusProgressStorage().store(key="b", record=RECORD, body=EMPTY, patch=patch)
    assert patch == {"status": {"kopf": {"progress": {"b": dict(RECORD)}}}}
    smart = kopf.SmartProgressStorage()
    patch = {}
    smart.store(key="b", record=RECORD, body=EMPTY, patch=patch)
    assert patch == {"metadata": {"annotations": {"kopf.zalando.org/b": COMPACT}}}
    in_status = {"status": {"kopf": {"progress": {"b": {"retries": 2}}}}}
    assert smart.fetch(key="b", body=in_status) == {"retries": 2}
    both = {"metadata": {"annotations": {"kopf.zalando.org/b": "{}"}}, **in_status}
    patch = {}
    smart.purge(key="b", body=both, patch=patch)
    assert patch == {
        "metadata": {"annotations": {"kopf.zalando.org/b": None}},
        "status": {"kopf": {"progress": {"b": None}}},
    }
    assert kopf.StatusProgressStorage(name="my-op").field == ("status", "my-op", "progress")


OBJ: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "X",
    "metadata": {
        "name": "n",
        "namespace": "ns",
        "uid": "u",
        "resourceVersion": "3",
        "generation": 2,
        "labels": {"l": "1"},
        "annotations": {
            "note": "keep",
            "kopf.zalando.org/last-handled-configuration": "{}",
            "kopf.zalando.org/create_fn": "{}",
            "other.kopf.zalando.org/x": "1",
            "my-op.example.com/kopf-managed": "yes",
            "my-op.example.com/foo": "1",
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
        },
        "managedFields": [{}],
    },
    "spec": {"a": 1, "b": [1, 2]},
    "status": {"phase": "Running", "kopf": {"progress": {}}},
    "data": {"k": "v"},
}
ESSENCE = {
    "spec": {"a": 1, "b": [1, 2]},
    "data": {"k": "v"},
    "metadata": {"labels": {"l": "1"}, "annotations": {"note": "keep"}},
}


def test_essence_as_kopf_builds_it() -> None:
    """kopf/_cogs/configs/diffbase.py: DiffBaseStorage.build (marked prefixes, kubectl's
    last-applied configuration, extra fields, ignored fields)."""
    d = kopf.AnnotationsDiffBaseStorage()
    assert d.build(body=OBJ) == ESSENCE
    assert d.build(body=OBJ, extra_fields=["status.phase"]) == {**ESSENCE, "status": {"phase": "Running"}}
    ignored = kopf.AnnotationsDiffBaseStorage(ignored_fields=["spec.b"]).build(body=OBJ)
    assert ignored == {**ESSENCE, "spec": {"a": 1}}


def test_diffbase_storages() -> None:
    """kopf/_cogs/configs/diffbase.py: AnnotationsDiffBaseStorage.store (compact JSON and a newline),
    StatusDiffBaseStorage.store/fetch, MultiDiffBaseStorage."""
    essence = {"spec": {"a": 1}, "metadata": {"labels": {"l": "1"}}}
    patch: dict[str, Any] = {}
    kopf.AnnotationsDiffBaseStorage().store(body=OBJ, patch=patch, essence=essence)
    encoded = '{"spec":{"a":1},"metadata":{"labels":{"l":"1"}}}\n'
    assert patch == {"metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": encoded}}}
    assert kopf.AnnotationsDiffBaseStorage().fetch(body={"metadata": patch["metadata"]}) == essence
    patch = {}
    kopf.StatusDiffBaseStorage().store(body=OBJ, patch=patch, essence={"spec": {"a": 1}})
    assert patch == {"status": {"kopf": {"last-handled-configuration": '{"spec":{"a":1}}'}}}
    in_status = {"status": {"kopf": {"last-handled-configuration": '{"spec":{"a":2}}'}}}
    assert kopf.StatusDiffBaseStorage().fetch(body=in_status) == {"spec": {"a": 2}}
    multi = kopf.MultiDiffBaseStorage([kopf.AnnotationsDiffBaseStorage(), kopf.StatusDiffBaseStorage()])
    assert multi.fetch(body=in_status) == {"spec": {"a": 2}}
    patch = {}
    multi.store(body=OBJ, patch=patch, essence={"spec": {"a": 1}})
    assert set(patch) == {"metadata", "status"}


def test_progress_records_as_kopf_writes_them() -> None:
    """kopf/_core/actions/progression.py: HandlerState.for_storage and format_iso8601 (UTC, with
    microseconds and +00:00), from_storage (naive times of older kopf read as UTC)."""
    t0 = dt.datetime(2026, 11, 27, 10, 0, tzinfo=dt.UTC).timestamp()
    p = Progress("create", t0, retries=1, delayed=t0 + 5.5, message="not yet")
    assert p.to_record() == RECORD
    assert Progress.from_record(RECORD, now=0.0) == p
    naive = Progress.from_record({"started": "2026-11-27T10:00:00.000000", "retries": 0}, now=0.0)
    assert naive.started == t0 and naive.purpose is None
