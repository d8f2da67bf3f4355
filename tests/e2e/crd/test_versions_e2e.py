"""Two versions of one kind, one of them the storage version, with the None conversion strategy.

Objects written through either version are readable through the other; the server applies
each version's defaults on read; the deprecated version warns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kubeop.client import Client
from kubeop.crd import CamelModel, CustomResource, crd_manifest

from .conftest import installed

pytestmark = pytest.mark.controlplane

GROUP = "versions.crd-tests.kubeop.dev"


class BackupSpecV1Beta1(CamelModel):
    schedule: str
    retention_days: int = 7


class BackupStatus(CamelModel):
    last_run: str | None = None


class BackupV1Beta1(
    CustomResource,
    group=GROUP,
    version="v1beta1",
    kind="Backup",
    short_names=["bk"],
    subresources=("status",),
    deprecated=True,
    deprecation_warning="versions.crd-tests.kubeop.dev/v1beta1 Backup is deprecated; use v1",
):
    spec: BackupSpecV1Beta1
    status: BackupStatus | None = None


class BackupSpec(BackupSpecV1Beta1):
    paused: bool = False  # new in v1: additive, so the None strategy loses nothing v1beta1 had


class Backup(BackupV1Beta1, version="v1", storage=True):
    spec: BackupSpec


@pytest.fixture(scope="module", autouse=True)
def backup_crd(control_plane: Any) -> Iterator[list[str]]:
    yield from installed(control_plane, [crd_manifest([BackupV1Beta1, Backup])])


def test_both_versions_are_served_and_v1_is_stored(control_plane: Any) -> None:
    crd = control_plane.api.call(
        "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/backups.{GROUP}"
    )
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == [
        ("v1", True, True),
        ("v1beta1", True, False),
    ]
    assert crd["spec"]["conversion"]["strategy"] == "None"
    assert crd["status"]["storedVersions"] == ["v1"]
    group = control_plane.api.call("GET", f"/apis/{GROUP}")
    assert group["preferredVersion"]["version"] == "v1"


async def test_written_in_v1beta1_read_in_v1(client: Client) -> None:
    old = await client.create(
        BackupV1Beta1(metadata={"name": "old"}, spec=BackupSpecV1Beta1(schedule="@daily", retention_days=3))  # type: ignore[arg-type]
    )
    assert isinstance(old, BackupV1Beta1) and old.spec.retention_days == 3
    new = await client.get(Backup, "old")
    assert isinstance(new, Backup)
    assert new.spec == BackupSpec(schedule="@daily", retention_days=3, paused=False)  # v1's default, on read
    assert new.metadata.uid == old.metadata.uid


async def test_written_in_v1_read_in_v1beta1(client: Client) -> None:
    new = await client.create(
        Backup(metadata={"name": "new"}, spec=BackupSpec(schedule="@hourly", paused=True))
    )  # type: ignore[arg-type]
    old = await client.get(BackupV1Beta1, "new")
    assert isinstance(old, BackupV1Beta1)
    assert old.spec == BackupSpecV1Beta1(schedule="@hourly", retention_days=7)
    assert old.metadata.resource_version == new.metadata.resource_version


async def test_status_written_in_one_version_is_seen_in_the_other(client: Client) -> None:
    created = await client.create(
        BackupV1Beta1(metadata={"name": "st"}, spec=BackupSpecV1Beta1(schedule="@daily"))
    )  # type: ignore[arg-type]
    created.status = BackupStatus(last_run="2026-05-01T00:00:00Z")
    await client.update_status(created)
    assert (await client.get(Backup, "st")).status == BackupStatus(last_run="2026-05-01T00:00:00Z")


async def test_lists_agree_across_versions(client: Client) -> None:
    for name in ("a", "b"):
        await client.create(Backup(metadata={"name": name}, spec=BackupSpec(schedule="@daily")))  # type: ignore[arg-type]
    v1 = await client.list(Backup)
    v1beta1 = await client.list(BackupV1Beta1)
    assert [b.metadata.name for b in v1.items] == [b.metadata.name for b in v1beta1.items] == ["a", "b"]
    assert all(isinstance(b, BackupV1Beta1) for b in v1beta1.items)


def test_the_deprecated_version_warns(control_plane: Any, namespace: str) -> None:
    obj = {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "Backup",
        "metadata": {"name": "w"},
        "spec": {"schedule": "@daily"},
    }
    res = control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))
    assert "Warning: versions.crd-tests.kubeop.dev/v1beta1 Backup is deprecated; use v1" in res.stderr
    res = control_plane.kubectl("get", f"backups.v1.{GROUP}", "-n", namespace, "-o", "name")
    assert res.stdout.strip() == f"backup.{GROUP}/w" and "Warning" not in res.stderr
