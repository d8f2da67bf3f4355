"""The Demo kind (seed 000's operator-sdk example, group yuerblog.cc), declared in Python."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from examples.kube import Condition
from kubeop import CamelModel, CustomResource, PrinterColumn, crd_manifest


class DemoSpec(CamelModel):
    image: str = Field(default="busybox", min_length=1, description="The image of the Pod.")


class DemoStatus(CamelModel):
    pod: str | None = None
    phase: str | None = None
    conditions: list[Condition] = Field(default_factory=list)  # the Pod dependent's, and Ready


class Demo(
    CustomResource,
    group="yuerblog.cc",
    version="v1",
    printer_columns=[PrinterColumn("Pod", ".status.pod"), PrinterColumn("Phase", ".status.phase")],
    subresources=("status",),
):
    """Keeps one busybox Pod running, like a Deployment with one replica."""

    spec: DemoSpec = DemoSpec()
    status: DemoStatus | None = None


CRD: dict[str, Any] = crd_manifest(Demo)


def sample(name: str = "demo", namespace: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": Demo.api_version,
        "kind": "Demo",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {},
    }
