"""Typed models generated from the server's OpenAPI v3 plug into the same verbs as dicts."""

from __future__ import annotations

from typing import Any

import pytest

from kubeop.client import Client
from kubeop.core import ApiResource, Conflict, GroupVersionKind, model_gvk

pytestmark = pytest.mark.controlplane


async def test_deployment_model_roundtrip(client: Client) -> None:
    Deployment: Any = await client.model("deployments.apps")
    assert model_gvk(Deployment) == GroupVersionKind("apps", "v1", "Deployment")
    assert await client.model(GroupVersionKind("apps", "v1", "Deployment")) is Deployment  # cached
    web = Deployment.model_validate(
        {
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80}]}]
                    },
                },
            },
        }
    )
    created = await client.create(web)
    assert isinstance(created, Deployment)
    assert (
        created.spec.replicas == 2 and created.spec.template.spec.containers[0].ports[0].containerPort == 80
    )
    assert created.metadata.uid and created.apiVersion == "apps/v1" and created.kind == "Deployment"
    deployments = ApiResource("apps", "v1", "deployments", kind="Deployment")
    while True:  # the deployment controller writes status concurrently: read-modify-write loop
        got = await client.get(Deployment, "web")
        as_dict = await client.get(deployments, "web")
        if got.metadata.resourceVersion != as_dict["metadata"]["resourceVersion"]:
            continue
        # Dumped by alias without Nones, the model is exactly the wire object.
        assert got.model_dump(mode="json", by_alias=True, exclude_none=True) == as_dict
        got.spec.replicas = 3
        try:
            updated = await client.update(got)
        except Conflict:
            continue
        break
    assert updated.spec.replicas == 3
    listed = await client.list(Deployment)
    assert [d.metadata.name for d in listed.items] == ["web"]


async def test_crd_and_recursive_schema_models(client: Client, widget_crd: str, eventually: Any) -> None:
    async def widget_model() -> Any:
        # A new CRD's schema reaches the OpenAPI v3 index a few seconds after it is Established.
        try:
            return await client.model("widgets.e2e.kubeop.dev")
        except LookupError:
            return None

    Widget: Any = await eventually(widget_model, what="the Widget schema in OpenAPI v3")
    made = await client.create(Widget(metadata={"name": "typed"}, spec={"size": 3}))
    assert made.spec.size == 3
    # CustomResourceDefinition's schema is recursive (JSONSchemaProps): it must still build.
    CRD: Any = await client.model("customresourcedefinitions.apiextensions.k8s.io")
    crd = await client.get(CRD, widget_crd)
    props = crd.spec.versions[0].schema_.openAPIV3Schema.properties
    assert props["spec"].properties["size"].type == "integer"
