"""The PhpDeployment CRD, derived from the chart's values.schema.json, and a sample object."""

from __future__ import annotations

from typing import Any

from examples.php_deployment.operator import CHART
from kubeop.helm import crd_for_chart

CRD: dict[str, Any] = crd_for_chart(CHART, "web.example.com", "v1", "PhpDeployment")


def sample(name: str, namespace: str, image: str = "php:8.3-apache", **values: Any) -> dict[str, Any]:
    """A PhpDeployment: ``spec`` holds the chart's values (here the image, plus any others)."""
    return {
        "apiVersion": "web.example.com/v1",
        "kind": "PhpDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"image": image, **values},
    }
