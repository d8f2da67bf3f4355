"""What the CronTab example installs, and the Manager that serves its webhooks."""

from __future__ import annotations

from typing import Any

from examples.crontab.api import VERSIONS
from examples.crontab.webhooks import conversion, webhooks
from kubeop.client import Client
from kubeop.crd import crd_manifest
from kubeop.webhook import Endpoint, webhook_configurations, with_conversion

NAME = "crontab-webhooks"


def manifests(endpoint: Endpoint) -> list[dict[str, Any]]:
    """The CRD (both versions, converted by the webhook) and the webhook configurations."""
    crd = with_conversion(crd_manifest(VERSIONS), conversion, endpoint)
    return [crd, *webhook_configurations(webhooks, NAME, endpoint)]


async def install(client: Client, endpoint: Endpoint) -> None:
    """Server-side apply of :func:`manifests` (re-running updates the caBundle and URLs)."""
    for obj in manifests(endpoint):
        await client.apply(obj, field_manager=NAME, force=True)
