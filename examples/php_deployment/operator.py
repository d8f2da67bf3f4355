"""The PhpDeployment operator: no code of its own, a chart and a watches.yaml entry.

``watches.yaml`` maps web.example.com/v1 PhpDeployment to ``helm-charts/php-deployment``; each
PhpDeployment becomes a Helm release of that chart named after it, with its ``spec`` as values.
The operator installs the release, upgrades it when the spec changes, recreates or reverts what
someone deletes or edits, and uninstalls it when the PhpDeployment is deleted.

Run it against any cluster (``KUBECONFIG``): ``python -m examples.php_deployment``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubeop import ApiResource
from kubeop.helm import HelmOperator, load_watches
from kubeop.kinds import Deployment, Ingress, Service

HERE = Path(__file__).parent
WATCHES = HERE / "watches.yaml"
CHART = HERE / "helm-charts" / "php-deployment"

# The custom resource has no model: the chart's values are its spec (see crd.py).
PHP_DEPLOYMENTS = ApiResource("web.example.com", "v1", "phpdeployments", kind="PhpDeployment")
# What the chart renders, as kubeop.kinds models (handles for reads in the tests and tools).
DEPLOYMENTS = Deployment.resource
SERVICES = Service.resource
INGRESSES = Ingress.resource


def operator(**options: Any) -> HelmOperator:
    """The operator for watches.yaml (options: see :class:`~kubeop.helm.HelmOperator`)."""
    return HelmOperator(load_watches(WATCHES), **options)
