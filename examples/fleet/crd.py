"""The Widget kind (fleet.example.com/v1), declared in Python; its CRD is generated from the model."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kubeop import CamelModel, CustomResource, PrinterColumn, crd_manifest


class WidgetSpec(CamelModel):
    value: str = Field(default="", description="What the Widget's ConfigMap holds (data.value).")


class WidgetStatus(CamelModel):
    config_map: str | None = Field(default=None, description="The ConfigMap kept for this Widget.")
    cluster: str | None = Field(default=None, description="The cluster that reconciled it (its own).")
    observed_generation: int | None = None


class Widget(
    CustomResource,
    group="fleet.example.com",
    version="v1",
    printer_columns=[PrinterColumn("ConfigMap", ".status.configMap"), PrinterColumn.age()],
    subresources=("status",),
):
    """A value, kept in a ConfigMap of the same name, in whichever cluster the Widget lives."""

    spec: WidgetSpec = WidgetSpec()
    status: WidgetStatus | None = None


CRD: dict[str, Any] = crd_manifest(Widget)


def sample(name: str, value: str, namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": Widget.api_version,
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"value": value},
    }
