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

HERE = Path(__file__).parent
WATCHES = HERE / "watches.yaml"
CHART = HERE / "helm-charts" / "php-deployment"

PHP_DEPLOYMENTS = ApiResource("web.example.com", "v1", "phpdeployments", kind="PhpDeployment")
DEPLOYMENTS = ApiResource("apps", "v1", "deployments", kind="Deployment")
SERVICES = ApiResource("", "v1", "services", kind="Service")
INGRESSES = ApiResource("networking.k8s.io", "v1", "ingresses", kind="Ingress")


def operator(**options: Any) -> HelmOperator:
    """The operator for watches.yaml (options: see :class:`~kubeop.helm.HelmOperator`)."""
    return HelmOperator(load_watches(WATCHES), **options)
