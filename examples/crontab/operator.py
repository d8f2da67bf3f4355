"""What the CronTab example installs (CRD, webhook configurations, RBAC) and the Manager that
runs its controller next to its webhooks."""

from __future__ import annotations

from typing import Any

from examples.crontab.api import VERSIONS
from examples.crontab.controller import CronTabController, controller
from examples.crontab.webhooks import conversion, webhooks
from kubeop.client import Client
from kubeop.crd import crd_manifest
from kubeop.crd.rbac import Permissions, cluster_role
from kubeop.manager import Manager
from kubeop.queue import Clock
from kubeop.webhook import Endpoint, webhook_configurations, with_conversion

NAME = "crontab-webhooks"
OPERATOR = "crontab-operator"


def manifests(endpoint: Endpoint) -> list[dict[str, Any]]:
    """The CRD (both versions, converted by the webhook) and the webhook configurations."""
    crd = with_conversion(crd_manifest(VERSIONS), conversion, endpoint)
    return [crd, *webhook_configurations(webhooks, NAME, endpoint)]


def rbac() -> dict[str, Any]:
    """The ClusterRole the operator needs: the rules declared on the controller (CronTabs, their
    status, Jobs), Events, and Leases for leader election."""
    rules = Permissions().declared(CronTabController).events().leases().rules()
    return cluster_role(OPERATOR, rules)


async def install(client: Client, endpoint: Endpoint) -> None:
    """Server-side apply of :func:`manifests` (re-running updates the caBundle and URLs)."""
    for obj in manifests(endpoint):
        await client.apply(obj, field_manager=NAME, force=True)


def build_manager(
    client: Client | None = None,
    *,
    name: str = OPERATOR,
    webhook_address: str | None = None,
    clock: Clock | None = None,
    **options: Any,
) -> Manager:
    """The CronTab controller, and the webhooks when ``webhook_address`` is given."""
    manager = Manager(
        client,
        name=name,
        webhooks=webhooks if webhook_address else None,
        webhook_address=webhook_address or "127.0.0.1:9443",
        clock=clock,
        **options,
    )
    manager.add(controller())
    return manager
