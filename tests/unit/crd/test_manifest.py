"""crd_manifest / crd_manifests / render_yaml: the CRD objects, versions and bad declarations."""

from __future__ import annotations

import datetime
from typing import Any
from unittest.mock import ANY

import pytest
import yaml
from pydantic import BaseModel, Field

from kubeop.crd import (
    CamelModel,
    CustomResource,
    DeclarationError,
    PrinterColumn,
    Scale,
    ValidationRule,
    VersionError,
    crd_manifest,
    crd_manifests,
    custom_resources,
    render_yaml,
)

GROUP = "manifest.unit.crd-tests.kubeop.dev"


class TinySpec(BaseModel):
    size: int = 1


class Tiny(CustomResource, group=GROUP, version="v1"):
    spec: TinySpec


def test_minimal_crd_in_full() -> None:
    assert crd_manifest(Tiny) == {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"tinies.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Tiny", "listKind": "TinyList", "plural": "tinies", "singular": "tiny"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "apiVersion": {"description": ANY, "type": "string"},
                                "kind": {"description": ANY, "type": "string"},
                                "metadata": {"type": "object"},
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer", "default": 1}},
                                },
                            },
                            "required": ["spec"],
                        }
                    },
                }
            ],
        },
    }


class JobSpec(CamelModel):
    cron_spec: str
    replicas: int = 1
    ratio: float = 0.5
    paused: bool = False
    started: datetime.datetime | None = None
    selector: str = ""
    labels: dict[str, str] = {}


class JobStatus(CamelModel):
    replicas: int = 0
    selector: str = ""
    conditions: list[dict[str, str]] = []


@ValidationRule("self.spec.replicas <= 100", message="at most 100 replicas")
class Job(
    CustomResource,
    group=GROUP,
    version="v1",
    short_names=["jb"],
    categories=["all", "kubeop-tests"],
    printer_columns=[
        PrinterColumn("Schedule", ".spec.cronSpec"),
        PrinterColumn("Replicas", ".spec.replicas"),
        PrinterColumn("Ratio", ".spec.ratio", priority=1),
        PrinterColumn("Paused", ".spec.paused"),
        PrinterColumn("Started", ".spec.started"),
        PrinterColumn("Team", ".spec.labels.team"),
        PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status', description="readiness"),
        PrinterColumn.age(),
    ],
    subresources=("status", Scale(label_selector_path=".status.selector")),
    validations=[ValidationRule("self.metadata.name.size() <= 30", message="name at most 30 characters")],
    selectable_fields=[".spec.cronSpec", ".spec.paused"],
):
    """A job that runs on a schedule."""

    spec: JobSpec
    status: JobStatus | None = None


def test_names_columns_subresources_and_selectable_fields() -> None:
    crd = crd_manifest(Job)
    assert crd["spec"]["names"] == {
        "kind": "Job",
        "listKind": "JobList",
        "plural": "jobs",
        "singular": "job",
        "shortNames": ["jb"],
        "categories": ["all", "kubeop-tests"],
    }
    (version,) = crd["spec"]["versions"]
    assert version["additionalPrinterColumns"] == [
        {"name": "Schedule", "type": "string", "jsonPath": ".spec.cronSpec"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "priority": 1},
        {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
        {"name": "Started", "type": "date", "jsonPath": ".spec.started"},
        {"name": "Team", "type": "string", "jsonPath": ".spec.labels.team"},
        {
            "name": "Ready",
            "type": "string",
            "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
            "description": "readiness",
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    assert version["selectableFields"] == [{"jsonPath": ".spec.cronSpec"}, {"jsonPath": ".spec.paused"}]


def test_root_carries_the_docstring_and_both_kinds_of_root_rules() -> None:
    root = crd_manifest(Job)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert root["description"] == "A job that runs on a schedule."
    assert root["x-kubernetes-validations"] == [
        {"rule": "self.metadata.name.size() <= 30", "message": "name at most 30 characters"},
        {"rule": "self.spec.replicas <= 100", "message": "at most 100 replicas"},
    ]
    assert list(root["properties"]) == ["apiVersion", "kind", "metadata", "spec", "status"]


def test_labels_and_annotations_on_the_crd() -> None:
    crd = crd_manifest(Tiny, labels={"app": "x"}, annotations={"note": "y"})
    assert crd["metadata"] == {
        "name": f"tinies.{GROUP}",
        "labels": {"app": "x"},
        "annotations": {"note": "y"},
    }


class ItemV1Alpha1(CustomResource, group=GROUP, version="v1alpha1", kind="Item", deprecated=True):
    spec: TinySpec = TinySpec()


class ItemV1Beta1(
    ItemV1Alpha1, version="v1beta1", deprecated=True, deprecation_warning="use v1: v1beta1 goes away in 2027"
):
    pass


class ItemV1(ItemV1Alpha1, version="v1", storage=True):
    note: str = ""


def test_versions_sorted_by_priority_with_one_storage_and_conversion_none() -> None:
    crd = crd_manifest([ItemV1Alpha1, ItemV1, ItemV1Beta1])
    versions = crd["spec"]["versions"]
    assert [(v["name"], v["storage"], v["served"]) for v in versions] == [
        ("v1", True, True),
        ("v1beta1", False, True),
        ("v1alpha1", False, True),
    ]
    assert versions[1]["deprecated"] is True
    assert versions[1]["deprecationWarning"] == "use v1: v1beta1 goes away in 2027"
    assert "deprecationWarning" not in versions[2] and "deprecated" not in versions[0]
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert "note" in versions[0]["schema"]["openAPIV3Schema"]["properties"]
    assert "note" not in versions[1]["schema"]["openAPIV3Schema"]["properties"]


def test_crd_manifests_groups_versions_by_kind_and_sorts_by_name() -> None:
    crds = crd_manifests([Tiny, ItemV1, Job, ItemV1Alpha1, ItemV1Beta1])
    assert [c["metadata"]["name"] for c in crds] == [f"items.{GROUP}", f"jobs.{GROUP}", f"tinies.{GROUP}"]
    assert len(crds[0]["spec"]["versions"]) == 3


def test_storage_version_rules() -> None:
    class A1(CustomResource, group="storage.example.com", version="v1", kind="A"):
        pass

    class A2(A1, version="v2"):
        pass

    class A3(A1, version="v3", storage=True):
        pass

    class A4(A1, version="v4", storage=True):
        pass

    class Lone(CustomResource, group="storage.example.com", version="v1", storage=False):
        pass

    with pytest.raises(
        VersionError, match=r"needs exactly one storage version, but none is marked; declare storage=True"
    ):
        crd_manifest([A1, A2])
    with pytest.raises(VersionError, match=r"but A3, A4 are all marked"):
        crd_manifest([A1, A3, A4])
    with pytest.raises(
        VersionError, match=r"Lone is the only version of Lone and must be the storage version"
    ):
        crd_manifest(Lone)
    assert [v["storage"] for v in crd_manifest([A1, A3])["spec"]["versions"]] == [True, False]


def test_versions_must_agree_on_identity_and_differ_in_version() -> None:
    class B1(CustomResource, group="agree.example.com", version="v1", kind="B", short_names=["b"]):
        pass

    class B2(CustomResource, group="agree.example.com", version="v2", kind="B", storage=True):
        pass

    class B1Again(B1):
        pass

    with pytest.raises(VersionError, match=r"B2 and B1 are versions of one CRD but differ in short_names"):
        crd_manifest([B1, B2])
    with pytest.raises(VersionError, match=r"B1Again and B1 both declare agree.example.com/v1 B"):
        crd_manifest([B1, B1Again])


def test_two_kinds_cannot_share_a_crd_name() -> None:
    class C(CustomResource, group="clash.example.com", version="v1", plural="things"):
        pass

    class D(CustomResource, group="clash.example.com", version="v1", plural="things"):
        pass

    with pytest.raises(VersionError, match=r"two kinds, C and D, would both be CRD things.clash.example.com"):
        crd_manifests([C, D])


def test_only_declared_custom_resources() -> None:
    class Abstract(CustomResource):
        pass

    with pytest.raises(
        DeclarationError, match=r"Abstract declares no kind: subclass CustomResource with group="
    ):
        crd_manifest(Abstract)
    with pytest.raises(DeclarationError, match="is not a CustomResource class"):
        crd_manifest(TinySpec)  # type: ignore[arg-type]
    with pytest.raises(VersionError, match="at least one"):
        crd_manifest([])


@pytest.mark.parametrize(
    ("kwargs", "fields", "message"),
    [
        (
            {"subresources": ("status",)},
            {},
            "E declares the status subresource but has no status field",
        ),
        (
            {"subresources": ("scale",)},
            {"spec": (TinySpec, TinySpec())},
            r"E: Scale spec_replicas_path '.spec.replicas' names no field of the schema",
        ),
        (
            {"subresources": (Scale(spec_replicas_path=".spec.size", status_replicas_path=".status.phase"),)},
            {"spec": (TinySpec, TinySpec()), "status": (dict[str, str], {})},
            r"status_replicas_path '.status.phase' must be a field of type integer, not string",
        ),
        (
            {"printer_columns": [PrinterColumn("Size", ".spec.sise")]},
            {"spec": (TinySpec, TinySpec())},
            r"printer column 'Size' path '.spec.sise' names no field of the schema",
        ),
        (
            {"selectable_fields": [".spec.size", ".spec.size"]},
            {"spec": (TinySpec, TinySpec())},
            "selectable_fields repeat a path",
        ),
        (
            {"selectable_fields": [".spec"]},
            {"spec": (TinySpec, TinySpec())},
            "selectable field '.spec' must name a string, boolean or integer field",
        ),
        (
            {"selectable_fields": [f".spec.f{i}" for i in range(9)]},
            {"spec": (dict[str, Any], {})},
            "at most 8 selectable_fields",
        ),
    ],
)
def test_declarations_checked_against_the_schema(
    kwargs: dict[str, Any], fields: dict[str, Any], message: str
) -> None:
    from pydantic import create_model

    model = create_model(
        "E",
        __base__=CustomResource,
        __cls_kwargs__={"group": "checks.example.com", "version": "v1", **kwargs},
        **fields,
    )
    with pytest.raises(DeclarationError, match=message):
        crd_manifest(model)


def test_columns_through_open_objects_are_allowed() -> None:
    class F(
        CustomResource,
        group="open.example.com",
        version="v1",
        printer_columns=[PrinterColumn("X", ".spec.any.x")],
    ):
        spec: dict[str, Any] = {}

    (column,) = crd_manifest(F)["spec"]["versions"][0]["additionalPrinterColumns"]
    assert column == {"name": "X", "type": "string", "jsonPath": ".spec.any.x"}


def test_render_yaml_is_a_stream_of_documents_that_reads_back() -> None:
    objs = [
        {
            "kind": "A",
            "text": "line one\nline two\n",
            "tricky": ["on", "yes", "1.0", "", "null", "*"],
            "n": None,
        },
        crd_manifest(Job),
    ]
    out = render_yaml(objs)
    assert out.startswith("---\nkind: A\n") and out.count("---\n") == 2
    assert "text: |\n  line one\n  line two\n" in out
    assert list(yaml.safe_load_all(out)) == objs
    assert render_yaml({"a": 1}) == "---\na: 1\n"


def test_render_yaml_keeps_key_order() -> None:
    out = render_yaml({"z": 1, "a": {"y": (1, 2), "b": 2}})
    assert out == "---\nz: 1\na:\n  y:\n  - 1\n  - 2\n  b: 2\n"


def test_field_constraints_survive_into_the_crd() -> None:
    class G(CustomResource, group="constraints.example.com", version="v1"):
        spec: dict[str, int] = Field(default={}, max_length=3)

    spec = crd_manifest(G)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec == {
        "type": "object",
        "default": {},
        "additionalProperties": {"type": "integer"},
        "maxProperties": 3,
    }


def test_custom_resources_finds_the_kinds_a_module_declares() -> None:
    import sys
    import types

    module = types.ModuleType("api_v1")
    module.Tiny = Tiny  # type: ignore[attr-defined]  # imported from elsewhere: not this module's
    assert custom_resources(module) == []
    this = sys.modules[__name__]
    assert custom_resources(this) == [Tiny, Job, ItemV1Alpha1, ItemV1Beta1, ItemV1]
    assert crd_manifests(custom_resources(this)) == crd_manifests(
        [Tiny, Job, ItemV1Alpha1, ItemV1Beta1, ItemV1]
    )


def test_a_resource_that_contains_itself_is_an_error() -> None:
    from kubeop.crd import SchemaError

    class Loop(CustomResource, group="loop.example.com", version="v1"):
        spec: dict[str, str] = {}
        children: list[Loop] = []

    with pytest.raises(SchemaError, match="Loop: it contains itself"):
        crd_manifest(Loop)
