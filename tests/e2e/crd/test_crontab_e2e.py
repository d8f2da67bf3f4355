"""Seed 001's CronTab, defined in Python, against the real API server.

The generated CRD is accepted; valid objects pass; wrong types, out-of-range values, a bad
pattern and a failing CEL rule are rejected by the server naming the field; the server applies
the defaults; ``kubectl get ct`` shows the printer columns; the status and scale subresources
work through the typed client.
"""

from __future__ import annotations

import datetime
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import Field

from kubeop.client import Client
from kubeop.core import Invalid
from kubeop.crd import (
    CamelModel,
    CustomResource,
    PrinterColumn,
    Scale,
    ValidationRule,
    crd_manifest,
)

from .conftest import installed

pytestmark = pytest.mark.controlplane

GROUP = "stable.crd-tests.kubeop.dev"


@ValidationRule("!self.image.endsWith(':latest')", message="pin the image", field_path=".image")
class CronTabSpec(CamelModel):
    """What to run and when."""

    cron_spec: str = Field(pattern=r"^(\S+\s+){4}\S+$", description="A cron schedule: five fields.")
    image: str = Field(min_length=1, max_length=256)
    replicas: int = Field(default=1, ge=0, le=10)


class CronTabStatus(CamelModel):
    replicas: int = 0
    last_schedule_time: datetime.datetime | None = None


class CronTab(
    CustomResource,
    group=GROUP,
    version="v1",
    short_names=["ct"],
    categories=["kubeop-crd-tests"],
    printer_columns=[
        PrinterColumn("Spec", ".spec.cronSpec"),
        PrinterColumn("Image", ".spec.image"),
        PrinterColumn("Replicas", ".spec.replicas"),
        PrinterColumn.age(),
    ],
    subresources=("status", Scale()),
):
    """A job that runs on a cron schedule (seed 001)."""

    spec: CronTabSpec
    status: CronTabStatus | None = None


CRONTABS = CronTab.resource


def crontab(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": CronTab.api_version, "kind": "CronTab", "metadata": {"name": name}, "spec": spec}


@pytest.fixture(scope="module", autouse=True)
def crontab_crd(control_plane: Any) -> Iterator[list[str]]:
    yield from installed(control_plane, [crd_manifest(CronTab)])


def test_the_server_serves_the_kind_with_its_names(control_plane: Any) -> None:
    group = control_plane.api.call("GET", f"/apis/{GROUP}/v1")
    res = {r["name"]: r for r in group["resources"]}
    assert res["crontabs"]["kind"] == "CronTab" and res["crontabs"]["namespaced"] is True
    assert res["crontabs"]["shortNames"] == ["ct"]
    assert res["crontabs"]["categories"] == ["kubeop-crd-tests"]
    assert {"crontabs/status", "crontabs/scale"} <= set(res)


async def test_valid_objects_round_trip_as_typed_models(client: Client, namespace: str) -> None:
    created = await client.create(
        CronTab(metadata={"name": "nightly"}, spec=CronTabSpec(cron_spec="0 3 * * *", image="backup:1.2"))  # type: ignore[arg-type]
    )
    assert isinstance(created, CronTab)
    assert created.metadata.namespace == namespace and created.metadata.uid
    got = await client.get(CronTab, "nightly")
    assert isinstance(got, CronTab) and got.spec == created.spec
    listed = await client.list(CronTab)
    assert [c.metadata.name for c in listed.items] == ["nightly"]
    assert all(isinstance(c, CronTab) for c in listed.items)


async def test_the_server_applies_defaults(client: Client) -> None:
    created = await client.create(crontab("defaults", cronSpec="* * * * *", image="a:1"), resource=CRONTABS)
    assert created["spec"]["replicas"] == 1


async def test_unknown_fields_are_pruned(client: Client) -> None:
    created = await client.create(
        crontab("pruned", cronSpec="* * * * *", image="a:1", colour="blue"), resource=CRONTABS
    )
    assert "colour" not in created["spec"]


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        pytest.param(
            {"cronSpec": 5, "image": "a:1"}, "spec.cronSpec", "must be of type string", id="wrong-type-string"
        ),
        pytest.param(
            {"cronSpec": "* * * * *", "image": "a:1", "replicas": "three"},
            "spec.replicas",
            "must be of type integer",
            id="wrong-type-integer",
        ),
        pytest.param(
            {"cronSpec": "* * * * *", "image": "a:1", "replicas": 11},
            "spec.replicas",
            "should be less than or equal to 10",
            id="out-of-range",
        ),
        pytest.param(
            {"cronSpec": "* * * * *", "image": "a:1", "replicas": -1},
            "spec.replicas",
            "should be greater than or equal to 0",
            id="below-range",
        ),
        pytest.param(
            {"cronSpec": "every day", "image": "a:1"}, "spec.cronSpec", "should match", id="pattern"
        ),
        pytest.param(
            {"cronSpec": "* * * * *", "image": "nginx:latest"}, "spec.image", "pin the image", id="cel-rule"
        ),
        pytest.param({"cronSpec": "* * * * *"}, "spec.image", "Required value", id="required"),
    ],
)
async def test_invalid_objects_are_rejected_naming_the_field(
    client: Client, spec: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(Invalid) as info:
        await client.create(crontab("bad", **spec), resource=CRONTABS)
    causes = {c.field: c.message for c in info.value.causes}
    assert field in causes, info.value.causes
    assert message in causes[field]


def test_kubectl_get_ct_shows_the_printer_columns(control_plane: Any, namespace: str) -> None:
    manifest = json.dumps(crontab("shown", cronSpec="*/5 * * * *", image="cron:2"))
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=manifest)
    header, row = control_plane.kubectl("get", "ct", "-n", namespace).stdout.splitlines()
    assert header.split() == ["NAME", "SPEC", "IMAGE", "REPLICAS", "AGE"]
    starts = [m.start() for m in re.finditer(r"\S+", header)] + [len(row)]
    cells = [row[a:b].strip() for a, b in itertools.pairwise(starts)]
    assert cells[:4] == ["shown", "*/5 * * * *", "cron:2", "1"]
    assert cells[4].endswith("s")  # AGE, e.g. "0s"


async def test_status_subresource(client: Client) -> None:
    ct = await client.create(
        CronTab(metadata={"name": "st"}, spec=CronTabSpec(cron_spec="0 * * * *", image="a:1"))  # type: ignore[arg-type]
    )
    when = datetime.datetime(2026, 5, 1, 12, 0, tzinfo=datetime.UTC)
    ct.status = CronTabStatus(replicas=1, last_schedule_time=when)
    ct.spec.replicas = 7  # ignored by the status endpoint
    updated = await client.update_status(ct)
    assert isinstance(updated, CronTab)
    assert updated.status == CronTabStatus(replicas=1, last_schedule_time=when)
    assert updated.spec.replicas == 1

    updated.status = CronTabStatus(replicas=99)  # ignored by the main endpoint
    updated.spec.replicas = 2
    again = await client.update(updated)
    assert again.spec.replicas == 2 and again.status is not None and again.status.replicas == 1


async def test_scale_subresource(client: Client) -> None:
    await client.create(
        CronTab(metadata={"name": "sc"}, spec=CronTabSpec(cron_spec="0 * * * *", image="a:1", replicas=2))  # type: ignore[arg-type]
    )
    scale = await client.get_scale(CronTab, "sc")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2
    await client.scale(CronTab, "sc", 4)
    assert (await client.get(CronTab, "sc")).spec.replicas == 4
