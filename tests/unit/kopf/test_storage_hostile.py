"""kopf's storages on objects whose annotations or status.kopf hold what no kopf wrote: invalid
JSON, JSON of the wrong type, fields of the wrong type, control characters, a megabyte. The
handler's record is ignored with one warning naming the object, the place and what is wrong
(never the value), the handler starts anew, the other handlers' records stay, and the cycle
writes once and then settles (kopf 1.45.2 fails the object's processing on each of these)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.client import Client
from kubeop.kopf.processing import Processor
from kubeop.testing import FakeCluster
from tests.unit.kopf.test_storage_cycle import CONFIGMAPS, CRD, WIDGETS, annotations, creation, run

SECRET = "s3cr3t-value"
DONE = {
    "started": "2026-11-27T10:00:00.000000+00:00",
    "stopped": "2026-11-27T10:00:00.100000+00:00",
    "purpose": "create",
    "retries": 1,
    "success": True,
}
HOSTILE_RECORDS = {
    "invalid JSON": "{" + SECRET,
    "a list": json.dumps([SECRET]),
    "a number": "5",
    "a string": json.dumps(SECRET),
    "retries a string": json.dumps({"retries": SECRET}),
    "retries an object": json.dumps({"retries": {"n": 1}}),
    "retries a float": '{"retries":1e308}',
    "retries negative": json.dumps({"retries": -1}),
    "retries a boolean": json.dumps({"retries": True}),
    "started a number": json.dumps({"started": 5}),
    "started not a time": json.dumps({"started": SECRET}),
    "delayed a list": json.dumps({"delayed": [1]}),
    "success a string": json.dumps({"success": "false"}),
    "message an object": json.dumps({"message": {"password": SECRET}}),
    "purpose a list": json.dumps({"purpose": [SECRET]}),
    "subrefs a string": json.dumps({"subrefs": "abc"}),
    "subrefs numbers": json.dumps({"subrefs": [1, 2]}),
    "subrefs objects": json.dumps({"subrefs": [{}]}),
    "control characters": '\x00\r\n{"retries":1}',
    "a megabyte": "{" + "x" * (1 << 20),
}


async def _make(api: Client, name: str, extra: dict[str, str]) -> None:
    await api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": {"kopf.zalando.org/a": json.dumps(DONE), **extra},
            },
            "data": {"password": SECRET},
        }
    )


@pytest.mark.parametrize("value", HOSTILE_RECORDS.values(), ids=HOSTILE_RECORDS.keys())
async def test_a_hostile_progress_record_is_ignored_with_a_warning_and_written_anew_once(
    value: str, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = FakeCluster()
    api = cluster.client()
    await _make(api, "x", {"kopf.zalando.org/b": value})
    await _make(api, "y", {})
    calls: list[str] = []
    p = creation(calls)
    with caplog.at_level(logging.WARNING, logger="kubeop.kopf"):
        obj = await run(p, api, CONFIGMAPS, "x")
    assert calls == ["b", "c"]  # a's record stayed: a is not run again
    assert p.writes == 1
    assert annotations(obj) == {
        "kopf.zalando.org/last-handled-configuration": f'{{"data":{{"password":"{SECRET}"}}}}\n'
    }
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "ConfigMap default/x" in warnings[0] and "annotation kopf.zalando.org/b" in warnings[0]
    assert SECRET not in warnings[0] and len(warnings[0]) < 400
    obj = await run(p, api, CONFIGMAPS, "x", times=2)  # settled: nothing runs, nothing is written
    assert calls == ["b", "c"] and p.writes == 1
    await run(p, api, CONFIGMAPS, "y")  # the next object is served as ever
    assert calls == ["b", "c", "b", "c"] and p.writes == 2
    await api.close()


HOSTILE_ESSENCES = {
    "invalid JSON": "{" + SECRET,
    "a list": json.dumps([SECRET]),
    "null": "null",
    "a string": json.dumps(SECRET),
    "a megabyte": "[" * (1 << 20),
}


@pytest.mark.parametrize("value", HOSTILE_ESSENCES.values(), ids=HOSTILE_ESSENCES.keys())
async def test_a_last_handled_configuration_that_is_no_object_is_ignored_and_replaced_once(
    value: str, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = FakeCluster()
    api = cluster.client()
    await api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "x",
                "namespace": "default",
                "annotations": {"kopf.zalando.org/last-handled-configuration": value},
            },
            "data": {"password": SECRET},
        }
    )
    calls: list[str] = []
    p = creation(calls)
    with caplog.at_level(logging.WARNING, logger="kubeop.kopf"):
        obj = await run(p, api, CONFIGMAPS, "x")
    assert calls == ["a", "b", "c"] and p.writes == 1  # as a new object: created once
    essence = annotations(obj)["kopf.zalando.org/last-handled-configuration"]
    assert json.loads(essence) == {"data": {"password": SECRET}}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "ConfigMap default/x" in warnings[0]
    assert "annotation kopf.zalando.org/last-handled-configuration" in warnings[0]
    assert SECRET not in warnings[0] and len(warnings[0]) < 400
    await run(p, api, CONFIGMAPS, "x", times=2)
    assert calls == ["a", "b", "c"] and p.writes == 1
    await api.close()


@pytest.mark.parametrize(
    "kopf_status",
    [
        {"progress": {"a": [SECRET]}},
        {"progress": {"a": SECRET}},
        {"progress": [SECRET]},
        {"last-handled-configuration": {"spec": {"v": 1}}},
        {"last-handled-configuration": 5},
        {"last-handled-configuration": "[1]"},
    ],
    ids=[
        "record a list",
        "record a string",
        "progress a list",
        "essence an object",
        "essence a number",
        "essence a list",
    ],
)
async def test_hostile_state_in_status_kopf_is_ignored_and_replaced_once(
    kopf_status: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    cluster = FakeCluster()
    cluster.add_crd(CRD)
    api = cluster.client()
    await api.create(
        {"apiVersion": "store.kubeop.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"v": 1}}
    )
    await api.patch(
        WIDGETS, "w", {"status": {"kopf": kopf_status}}, namespace="default", subresource="status"
    )
    calls: list[str] = []
    p = creation(calls, status=True)
    with caplog.at_level(logging.WARNING, logger="kubeop.kopf"):
        obj = await run(p, api, WIDGETS, "w")
    assert calls == ["a", "b", "c"] and p.writes == 1
    assert json.loads(obj["status"]["kopf"]["last-handled-configuration"]) == {"spec": {"v": 1}}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert all("Widget default/w" in w and "status.kopf." in w and SECRET not in w for w in warnings)
    await run(p, api, WIDGETS, "w", times=2)
    assert calls == ["a", "b", "c"] and p.writes == 1
    await api.close()


def test_handlers_whose_ids_get_one_annotation_name_are_named_in_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = kopf.Registry()
    for handler_id in ("a/b", "a.b", "x<y>z", "x_y_z", "fine"):
        kopf.on.create("configmaps", registry=reg, id=handler_id)(lambda **_: None)
    kopf.on.update("configmaps", registry=reg, id="fine")(lambda **_: None)  # one id twice: one record
    with caplog.at_level(logging.WARNING, logger="kubeop.kopf"):
        Processor("configmaps", list(reg.changing("configmaps")))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2, warnings
    assert "'a/b' and 'a.b'" in warnings[0] and "'x<y>z' and 'x_y_z'" in warnings[1]
    assert "id=" in warnings[0]


def test_handler_ids_that_make_annotation_names_the_api_server_refuses_are_named_in_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = kopf.Registry()
    for handler_id in ("<lambda>", "trailing/", "with space", "a/../b", "Fine_1.x", "x" * 200):
        kopf.on.create("configmaps", registry=reg, id=handler_id)(lambda **_: None)
    with caplog.at_level(logging.WARNING, logger="kubeop.kopf"):
        Processor("configmaps", list(reg.changing("configmaps")))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w.split("handler id ")[1].split(" makes")[0] for w in warnings] == [
        "'<lambda>'",
        "'trailing/'",
        "'with space'",
    ]
    assert all("give it an id=" in w for w in warnings)
