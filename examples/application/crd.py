"""The Application kind, declared in Python; its CRD is generated from the model."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kubeop import CamelModel, CustomResource, PrinterColumn, crd_manifest


class ApplicationSpec(CamelModel):
    replicas: int = Field(default=1, ge=0, description="Pods the Deployment runs.")
    template: dict[str, Any] = Field(description="The Deployment's pod template (a PodTemplateSpec).")


class ApplicationStatus(CamelModel):
    reconcile_count: int | None = Field(default=None, description="Reconciles that changed something.")
    ready_replicas: int | None = None
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] | None = None


class Application(
    CustomResource,
    group="apps.example.com",
    version="v1",
    short_names=["app"],
    printer_columns=[
        PrinterColumn("Ready", ".status.readyReplicas"),
        PrinterColumn("Reconciles", ".status.reconcileCount"),
        PrinterColumn.age(),
    ],
    subresources=("status",),
):
    """An application: a Deployment built from a template, kept alive by its operator (seed 004)."""

    spec: ApplicationSpec
    status: ApplicationStatus | None = None


CRD: dict[str, Any] = crd_manifest(Application)


def sample(
    name: str = "web", namespace: str = "default", image: str = "nginx:1.27", replicas: int = 2
) -> dict[str, Any]:
    return {
        "apiVersion": Application.api_version,
        "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "template": {"spec": {"containers": [{"name": "web", "image": image}]}},
        },
    }
