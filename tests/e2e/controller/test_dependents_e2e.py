"""A workflow of dependents on the full local control plane: order (a Service only once its
Deployment is available), a precondition turning false deleting its dependent, a read-only
dependent gating readiness, status aggregation, and garbage collection through owner references.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import ConfigDict, Field

from kubeop.controller import Controller, Dependent, Workflow
from kubeop.core.resource import ApiResource
from kubeop.crd import CamelModel, CustomResource, crd_manifest
from kubeop.manager import Manager, Serving
from kubeop.testing import ControlPlane

from .conftest import client_for, eventually, running

pytestmark = [pytest.mark.controlplane, pytest.mark.full]

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
SERVICES = ApiResource("", "v1", "services", kind="Service")
DEPLOYMENTS = ApiResource("apps", "v1", "deployments", kind="Deployment")


class SiteSpec(CamelModel):
    image: str = "nginx"
    replicas: int = 1
    cache: bool = False


class SiteStatus(CamelModel):
    model_config = ConfigDict(extra="allow")

    conditions: list[dict[str, Any]] = Field(default_factory=list)


class Site(CustomResource, group="deps.e2e.kubeop.dev", version="v1", subresources=["status"]):
    spec: SiteSpec = Field(default_factory=SiteSpec)
    status: SiteStatus | None = None


SITES = ApiResource("deps.e2e.kubeop.dev", "v1", "sites", kind="Site")


class Timeline:
    """When things happened, in the order they happened."""

    def __init__(self) -> None:
        self.events: list[tuple[str, float]] = []

    def saw(self, what: str) -> None:
        if what not in self.first:
            self.events.append((what, time.monotonic()))

    @property
    def first(self) -> dict[str, float]:
        return dict(reversed(self.events))


def workflow(timeline: Timeline) -> Workflow:
    def labels(site: Site) -> dict[str, str]:
        return {"app": site.metadata.name or ""}

    def config(site: Site, ctx: Any) -> dict[str, Any]:
        return {"metadata": {"name": f"{site.metadata.name}-config"}, "data": {"image": site.spec.image}}

    def cache(site: Site, ctx: Any) -> dict[str, Any]:
        return {"metadata": {"name": f"{site.metadata.name}-cache"}, "data": {"size": "64Mi"}}

    def deployment(site: Site, ctx: Any) -> dict[str, Any]:
        return {
            "metadata": {"name": site.metadata.name},
            "spec": {
                "replicas": site.spec.replicas,
                "selector": {"matchLabels": labels(site)},
                "template": {
                    "metadata": {"labels": labels(site)},
                    "spec": {"containers": [{"name": "web", "image": site.spec.image}]},
                },
            },
        }

    def available(d: dict[str, Any]) -> bool:
        status = d.get("status") or {}
        ok = (
            status.get("observedGeneration") == d["metadata"]["generation"]
            and status.get("availableReplicas", 0) >= d["spec"]["replicas"]
        )
        if ok:
            timeline.saw("deployment available")
        return bool(ok)

    def service(site: Site, ctx: Any) -> dict[str, Any]:
        timeline.saw("service desired")
        return {
            "metadata": {"name": site.metadata.name},
            "spec": {"selector": labels(site), "ports": [{"port": 80, "targetPort": 8080}]},
        }

    return Workflow(
        Dependent(CONFIGMAPS, desired=config, name="config"),
        Dependent(
            CONFIGMAPS, desired=cache, name="cache", reconcile_precondition=lambda s, ctx: s.spec.cache
        ),
        Dependent(DEPLOYMENTS, desired=deployment, ready=available, depends_on="config"),
        Dependent(SERVICES, desired=service, depends_on="deployment"),
        Dependent.external(SECRETS, name="shared-tls", dependent_name="tls"),
    )


def _conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions", [])}


async def test_a_workflow_orders_deletes_aggregates_and_is_collected(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.install_crds([crd_manifest(Site)])
    timeline = Timeline()
    async with (
        client_for(control_plane.kubeconfig_path) as api,
        client_for(control_plane.kubeconfig_path) as c,
    ):
        manager = Manager(c, name="sites", serving=Serving(metrics_address=None, health_address=None))
        manager.add(Controller.for_(Site, namespace=namespace).dependents(workflow(timeline)))
        async with running(manager):
            site = {
                "apiVersion": Site.api_version,
                "kind": "Site",
                "metadata": {"name": "web", "namespace": namespace},
            }
            await api.create({**site, "spec": {"image": "nginx", "replicas": 1, "cache": True}})

            async def conditions() -> dict[str, tuple[str, str]]:
                return _conditions(await api.get(SITES, "web", namespace=namespace))

            async def waiting_for_tls() -> bool:
                c = await conditions()
                return (
                    c.get("TlsReady", ("", ""))[0] == "False" and c.get("ServiceReady", ("", ""))[0] == "True"
                )

            # everything but the read-only Secret, which nobody made yet
            await eventually(waiting_for_tls, 60, "the dependents made, the external Secret missing")
            assert (await conditions())["Ready"] == ("False", "DependentsNotReady")
            assert timeline.first["deployment available"] <= timeline.first["service desired"]
            for res, name in (
                (CONFIGMAPS, "web-config"),
                (CONFIGMAPS, "web-cache"),
                (DEPLOYMENTS, "web"),
                (SERVICES, "web"),
            ):
                child = await api.get(res, name, namespace=namespace)
                (ref,) = child["metadata"]["ownerReferences"]
                assert (ref["kind"], ref["name"], ref["controller"]) == ("Site", "web", True)

            await api.create(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "shared-tls", "namespace": namespace},
                }
            )
            # The Secret is not watched: the next event on the Site brings its reconcile.
            await api.patch(SITES, "web", {"metadata": {"labels": {"touched": "1"}}}, namespace=namespace)

            async def all_ready() -> bool:
                c = await conditions()
                return c.get("Ready") == ("True", "DependentsReady")

            await eventually(all_ready, 30, "Ready once the external Secret exists")
            final = await conditions()
            assert final["Progressing"] == ("False", "Complete")
            assert final["Degraded"] == ("False", "AsExpected")
            assert {t for t, (s, _) in final.items() if t.endswith("Ready") and t != "Ready"} == {
                "ConfigReady",
                "CacheReady",
                "DeploymentReady",
                "ServiceReady",
                "TlsReady",
            }

            # the precondition turns false: the cache ConfigMap goes, and its condition with it
            await api.patch(SITES, "web", {"spec": {"cache": False}}, namespace=namespace)

            async def cache_gone() -> bool:
                missing = await api.get_or_none(CONFIGMAPS, "web-cache", namespace=namespace) is None
                return missing and "CacheReady" not in await conditions()

            await eventually(cache_gone, 30, "the cache ConfigMap deleted")
            assert await api.get_or_none(CONFIGMAPS, "web-config", namespace=namespace) is not None

            # the primary goes: the garbage collector takes its children (owner references)
            await api.delete(SITES, "web", namespace=namespace)

            async def children_gone() -> bool:
                for res, name in ((CONFIGMAPS, "web-config"), (DEPLOYMENTS, "web"), (SERVICES, "web")):
                    if await api.get_or_none(res, name, namespace=namespace) is not None:
                        return False
                return True

            await eventually(children_gone, 60, "the children garbage-collected")
            assert await api.get_or_none(SECRETS, "shared-tls", namespace=namespace) is not None
