"""The CronTab operator: what it installs (CRD, webhook configurations, RBAC) and the Manager that
runs its controller next to its webhooks.

    python -m examples.crontab

:func:`main` generates a CA and a serving certificate for 127.0.0.1 (kept for the next run),
applies the CRD and the webhook configurations with that CA as caBundle, then runs the
controller (a Job at each scheduled time) and serves the webhooks on https://127.0.0.1:9443
until SIGTERM / SIGINT. The API server has to reach 127.0.0.1, as the local control plane
(``kubeop cluster up``) does. LEADER_ELECT=true runs it with leader election.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any

from examples.crontab.api import VERSIONS
from examples.crontab.controllers.crontab import CronTabController, controller
from examples.crontab.webhooks import crontab_v1, crontab_v1beta1
from examples.crontab.webhooks.crontab_v1 import conversion
from kubeop.client import Client, load_config
from kubeop.crd import crd_manifest
from kubeop.crd.rbac import Permissions, cluster_role
from kubeop.manager import LeaderElection, Manager, Serving
from kubeop.queue import Clock
from kubeop.webhook import (
    CertSecret,
    Endpoint,
    Webhooks,
    local_certificates,
    webhook_configurations,
    with_conversion,
)

NAME = "crontab-webhooks"
OPERATOR = "crontab-operator"
ADDRESS = "127.0.0.1:9443"

# --8<-- [start:manifests]
webhooks = Webhooks([*crontab_v1beta1.WEBHOOKS, *crontab_v1.WEBHOOKS])
"""Every webhook the operator serves: validation and defaulting of v1beta1, the conversion."""


def manifests(endpoint: Endpoint) -> list[dict[str, Any]]:
    """The CRD (both versions, converted by the webhook) and the webhook configurations."""
    crd = with_conversion(crd_manifest(VERSIONS), conversion, endpoint)
    return [crd, *webhook_configurations(webhooks, NAME, endpoint)]


# --8<-- [end:manifests]


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
    serving: Serving | None = None,
    with_webhooks: bool = False,
    leader_election: bool | LeaderElection = False,
    clock: Clock | None = None,
) -> Manager:
    """The CronTab controller, and its webhooks ``with_webhooks`` (served as ``serving`` says:
    ``Serving(webhook_address=..., webhook_cert_dir=...)``)."""
    manager = Manager(
        client,
        name=name,
        webhooks=webhooks if with_webhooks else None,
        serving=serving,
        leader_election=leader_election,
        clock=clock,
    )
    manager.add(controller())
    return manager


async def _install(endpoint: Endpoint) -> None:
    async with Client(load_config()) as client:
        await install(client, endpoint)


def _in_cluster(env: Mapping[str, str]) -> dict[str, Any]:
    """The webhook options of a Deployment made from config/default: the address, the certificate
    directory and the self-managed certificate Secret (``kubeop deploy`` has applied the CRD and
    the webhook configurations; the Secret's CA is injected into them)."""
    service, namespace = env["WEBHOOK_SERVICE"], env.get("POD_NAMESPACE", "")
    if not namespace:
        raise SystemExit("WEBHOOK_SERVICE needs POD_NAMESPACE (the pod's namespace)")
    secret = env.get("WEBHOOK_CERT_SECRET")
    inject = [entry for entry in env.get("WEBHOOK_CA_INJECT", "").split(",") if entry]
    return {
        "webhook_address": env.get("WEBHOOK_BIND_ADDRESS", "0.0.0.0:9443"),
        "webhook_cert_dir": env.get("WEBHOOK_CERT_DIR"),
        "webhook_cert_secret": (
            CertSecret.for_service(secret, service, namespace, inject=inject) if secret else None
        ),
    }


def main() -> None:
    """Run the operator, configured from the environment: LEADER_ELECT (false),
    METRICS_BIND_ADDRESS and HEALTH_PROBE_BIND_ADDRESS (127.0.0.1:8080 and :8081, empty: off), and
    WEBHOOK_SERVICE (with WEBHOOK_BIND_ADDRESS, WEBHOOK_CERT_DIR, WEBHOOK_CERT_SECRET,
    WEBHOOK_CA_INJECT, POD_NAMESPACE, as config/default sets them) for a Deployment; without it,
    the local run described above."""
    env = os.environ
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if env.get("WEBHOOK_SERVICE"):
        webhook = _in_cluster(env)
    else:
        certs = local_certificates()  # in this user's private cert dir
        asyncio.run(_install(Endpoint.url(f"https://{ADDRESS}", ca_bundle=certs.ca_pem)))
        webhook = {"webhook_address": ADDRESS, "webhook_cert_dir": str(certs.directory)}
    elect = env.get("LEADER_ELECT", "false").lower() in ("1", "true", "yes")
    manager = build_manager(
        serving=Serving(
            metrics_address=env.get("METRICS_BIND_ADDRESS", "127.0.0.1:8080") or None,
            health_address=env.get("HEALTH_PROBE_BIND_ADDRESS", "127.0.0.1:8081") or None,
            **webhook,
        ),
        with_webhooks=True,
        leader_election=LeaderElection(id=f"{OPERATOR}-leader") if elect else False,
    )
    manager.run()
