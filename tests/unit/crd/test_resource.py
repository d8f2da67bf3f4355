"""CustomResource: declaration by class keywords, the typed-model protocol, dict round trips."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field, ValidationError

from kubeop.core import (
    ApiResource,
    GroupVersionKind,
    from_dict,
    is_model_class,
    model_gvk,
    model_resource,
    to_dict,
)
from kubeop.crd import (
    CamelModel,
    CustomResource,
    DeclarationError,
    ObjectMeta,
    PrinterColumn,
    Scale,
    ValidationRule,
)

GROUP = "resource.unit.crd-tests.kubeop.dev"


class WidgetSpec(CamelModel):
    size_gb: int = Field(default=1, ge=1)
    color: str | None = None


class WidgetStatus(CamelModel):
    ready_replicas: int = 0


class Widget(
    CustomResource,
    group=GROUP,
    version="v1",
    short_names=["wdg"],
    categories=["kubeop-tests"],
    subresources=(
        "status",
        Scale(spec_replicas_path=".spec.sizeGb", status_replicas_path=".status.readyReplicas"),
    ),
    printer_columns=[PrinterColumn("Size", ".spec.sizeGb")],
    validations=[ValidationRule("self.metadata.name.size() <= 40", message="name too long")],
):
    spec: WidgetSpec = WidgetSpec()
    status: WidgetStatus | None = None


class WidgetV2(Widget, version="v2", storage=True):
    pass


class Shared(CustomResource):
    """An abstract base: no group/version, so no kind."""

    spec: dict[str, Any] = {}


class Gadget(Shared, group=GROUP, version="v1alpha1", scope="Cluster", plural="gadgetry"):
    pass


WIRE: dict[str, Any] = {
    "apiVersion": f"{GROUP}/v1",
    "kind": "Widget",
    "metadata": {
        "name": "w",
        "namespace": "ns",
        "resourceVersion": "7",
        "uid": "u-1",
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "labels": {"a": "b"},
        "managedFields": [{"manager": "kubectl"}],
    },
    "spec": {"sizeGb": 3, "color": "red"},
    "status": {"readyReplicas": 2},
}


def test_declared_class_satisfies_the_core_model_protocol() -> None:
    assert is_model_class(Widget)
    assert model_gvk(Widget) == GroupVersionKind(GROUP, "v1", "Widget")
    assert model_resource(Widget) == ApiResource(
        GROUP,
        "v1",
        "widgets",
        kind="Widget",
        namespaced=True,
        singular="widget",
        short_names=("wdg",),
        subresources=("status", "scale"),
    )
    assert Widget.api_version == f"{GROUP}/v1" and Widget.kind == "Widget"


def test_abstract_bases_are_not_models() -> None:
    assert not is_model_class(CustomResource)
    assert not is_model_class(Shared)
    assert not Shared.is_declared()


def test_defaults_of_a_declaration() -> None:
    decl = Gadget.__crd__
    assert (decl.kind, decl.plural, decl.singular, decl.scope) == ("Gadget", "gadgetry", "gadget", "Cluster")
    assert decl.crd_name == f"gadgetry.{GROUP}" and decl.list_kind == "GadgetList"
    assert model_resource(Gadget) == ApiResource(
        GROUP, "v1alpha1", "gadgetry", kind="Gadget", namespaced=False, singular="gadget"
    )


def test_a_later_version_inherits_identity_but_not_version_flags() -> None:
    v1, v2 = Widget.__crd__, WidgetV2.__crd__
    assert v2.version == "v2" and v2.storage is True and v1.storage is None
    for attr in (
        "group",
        "kind",
        "plural",
        "short_names",
        "categories",
        "printer_columns",
        "scale",
        "validations",
    ):
        assert getattr(v2, attr) == getattr(v1, attr), attr
    assert WidgetV2.resource.version == "v2"


def test_a_subclass_without_keywords_keeps_the_declaration() -> None:
    class Special(Widget):
        def describe(self) -> str:
            return f"{self.metadata.name}: {self.spec.size_gb} GB"

    assert Special.__crd__.version == "v1" and Special.__crd__.owner == "Special"
    assert Special.model_validate(WIRE).describe() == "w: 3 GB"


def test_round_trip_keeps_every_field_of_the_wire_form() -> None:
    widget = from_dict(Widget, WIRE)
    assert isinstance(widget, Widget) and isinstance(widget.metadata, ObjectMeta)
    assert widget.spec.size_gb == 3 and widget.metadata.resource_version == "7"
    assert to_dict(widget) == WIRE  # unknown metadata (managedFields) kept, camelCase restored
    assert list(to_dict(widget))[:2] == ["apiVersion", "kind"]


def test_dump_leaves_out_unset_optionals_for_the_api() -> None:
    widget = Widget(metadata={"name": "new"}, spec=WidgetSpec(size_gb=2))  # type: ignore[arg-type]
    assert to_dict(widget) == {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": "new"},
        "spec": {"sizeGb": 2},
    }
    assert widget.model_dump()["apiVersion"] == f"{GROUP}/v1"  # a plain dump is complete too


def test_snake_and_camel_names_both_validate() -> None:
    assert WidgetSpec.model_validate({"size_gb": 4}).size_gb == 4
    assert WidgetSpec.model_validate({"sizeGb": 5}).size_gb == 5


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"kind": "Gadget"}, "kind is 'Gadget', but Widget is a Widget"),
        ({"apiVersion": f"{GROUP}/v2"}, f"apiVersion is '{GROUP}/v2', but Widget is {GROUP}/v1"),
    ],
)
def test_reading_the_wrong_kind_or_version_is_an_error(patch: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Widget.model_validate({**WIRE, **patch})


def test_objects_without_type_fields_validate() -> None:
    widget = Widget.model_validate({"metadata": {"name": "x"}, "spec": {}})
    assert widget.spec.size_gb == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"group": "example.com"}, r"Bad: version= is required \(class Bad\(CustomResource, version=...\)\)"),
        ({"version": "v1"}, "Bad: group= is required"),
        ({"group": "Example.com", "version": "v1"}, "Bad: group 'Example.com' is not a DNS subdomain"),
        (
            {"group": "example", "version": "v1"},
            "Bad: group 'example' must be a domain with at least one dot",
        ),
        ({"group": "example.com", "version": "1.0"}, "Bad: version '1.0' is not a Kubernetes version name"),
        (
            {"group": "example.com", "version": "v1", "kind": "bad_kind"},
            "Bad: kind 'bad_kind' is not CamelCase",
        ),
        (
            {"group": "example.com", "version": "v1", "plural": "Bads"},
            "Bad: plural 'Bads' is not a lower-case",
        ),
        ({"group": "example.com", "version": "v1", "scope": "namespaced"}, "scope 'namespaced' must be"),
        ({"group": "example.com", "version": "v1", "short_names": "b"}, "short_names must be a list"),
        ({"group": "example.com", "version": "v1", "subresources": "status"}, "subresources must be a tuple"),
        ({"group": "example.com", "version": "v1", "subresources": ("logs",)}, "unknown subresource 'logs'"),
        ({"group": "example.com", "version": "v1", "deprecation_warning": "x"}, "needs deprecated=True"),
        ({"group": "example.com", "version": "v1", "plural": "bad", "singular": "bad"}, "both 'bad'"),
        (
            {"group": "example.com", "version": "v1", "selectable_fields": [".metadata.name"]},
            "outside metadata",
        ),
    ],
)
def test_bad_declarations_fail_at_class_definition(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(DeclarationError, match=message):

        class Bad(CustomResource, **kwargs):
            pass


def test_the_kind_defaults_to_the_class_name_and_must_be_camel_case() -> None:
    with pytest.raises(DeclarationError, match=r"kind 'lower' is not CamelCase.*'Lower'"):

        class lower(CustomResource, group="example.com", version="v1"):
            pass


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: PrinterColumn("X", "spec.x"), "json_path 'spec.x' must start with '.'"),
        (lambda: PrinterColumn("X", ".spec.x", type="float"), "type 'float' must be one of"),  # type: ignore[arg-type]
        (lambda: PrinterColumn("X", ".spec.x", format="ip"), "format 'ip' must be one of"),
        (lambda: PrinterColumn("X", ".spec.x", priority=-1), "priority must be >= 0"),
        (lambda: PrinterColumn(" ", ".spec.x"), "needs a name"),
        (lambda: Scale(spec_replicas_path=".status.replicas"), "must be a dotted path under .spec"),
        (lambda: Scale(status_replicas_path=".spec.replicas"), "must be a dotted path under .status"),
        (lambda: Scale(label_selector_path=".metadata.labels"), "under .spec or .status"),
    ],
)
def test_columns_and_scale_check_their_paths(make: Any, message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        make()
