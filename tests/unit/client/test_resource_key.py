"""resource_key: the one rule for when two ways of naming a resource are the same resource."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from kubeop.client import ResourceKey, RESTMapper, resource_key
from kubeop.core import ApiResource, GroupVersionKind

DEPLOYMENTS = ApiResource(
    "apps", "v1", "deployments", kind="Deployment", singular="deployment", short_names=("deploy",)
)
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap", singular="configmap", short_names=("cm",))
WIDGETS_V1 = ApiResource("example.com", "v1", "widgets", kind="Widget", singular="widget")
WIDGETS_V2 = ApiResource("example.com", "v2", "widgets", kind="Widget", singular="widget")
MAPPER = RESTMapper(
    [DEPLOYMENTS, CONFIGMAPS, WIDGETS_V1, WIDGETS_V2],
    {"": ["v1"], "apps": ["v1"], "example.com": ["v2", "v1"]},
)


class Deployment:
    api_version: ClassVar[str] = "apps/v1"
    kind: ClassVar[str] = "Deployment"

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> Deployment:
        return cls()


class Widget:
    """A model that declares its ApiResource (no discovery needed)."""

    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    resource: ClassVar[ApiResource] = WIDGETS_V1

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> Widget:
        return cls()


APPS_V1_DEPLOYMENT = ("apps", "v1", "Deployment")


@pytest.mark.parametrize(
    ("what", "mapper", "key"),
    [
        # Known without discovery.
        (DEPLOYMENTS, None, APPS_V1_DEPLOYMENT),
        (ApiResource("apps", "v1", "deployments", kind="Deployment"), None, APPS_V1_DEPLOYMENT),
        (GroupVersionKind("apps", "v1", "Deployment"), None, APPS_V1_DEPLOYMENT),
        (Deployment, None, APPS_V1_DEPLOYMENT),
        (Deployment(), None, APPS_V1_DEPLOYMENT),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}}, None, APPS_V1_DEPLOYMENT),
        (Widget, None, ("example.com", "v1", "Widget")),
        # Names, short names, kinds and qualified names resolve through discovery.
        ("deployments", MAPPER, APPS_V1_DEPLOYMENT),
        ("deploy", MAPPER, APPS_V1_DEPLOYMENT),
        ("deployment", MAPPER, APPS_V1_DEPLOYMENT),
        ("Deployment", MAPPER, APPS_V1_DEPLOYMENT),
        ("Deployment.apps", MAPPER, APPS_V1_DEPLOYMENT),
        ("deployments.v1.apps", MAPPER, APPS_V1_DEPLOYMENT),
        ("cm", MAPPER, ("", "v1", "ConfigMap")),
        ("widgets", MAPPER, ("example.com", "v2", "Widget")),  # the group's preferred version
        ("widgets.v1.example.com", MAPPER, ("example.com", "v1", "Widget")),
        # A kindless ApiResource and a version-less GVK, completed by discovery.
        (ApiResource("apps", "v1", "deployments"), MAPPER, APPS_V1_DEPLOYMENT),
        (GroupVersionKind("example.com", "", "Widget"), MAPPER, ("example.com", "v2", "Widget")),
        # Before discovery (or when it does not know them): equal only to the same naming.
        ("Deployments", None, ("name", "deployments")),
        ("nothing.example.com", MAPPER, ("name", "nothing.example.com")),
        (ApiResource("apps", "v1", "deployments"), None, ("plural", "apps", "v1", "deployments")),
        (GroupVersionKind("example.com", "", "Widget"), None, ("example.com", "", "Widget")),
    ],
)
def test_every_naming_has_one_key(what: object, mapper: RESTMapper | None, key: ResourceKey) -> None:
    assert resource_key(what, mapper) == key


def test_an_object_without_apiversion_or_kind_says_what_is_missing() -> None:
    with pytest.raises(ValueError, match="apiVersion/kind"):
        resource_key({"kind": "ConfigMap", "metadata": {}})


def test_anything_else_is_a_type_error_naming_the_accepted_forms() -> None:
    with pytest.raises(TypeError, match="ApiResource, a GroupVersionKind"):
        resource_key(42)


async def test_the_client_keys_against_the_discovery_it_has_loaded() -> None:
    from kubeop.testing import FakeCluster

    async with FakeCluster().client() as api:
        assert api.resource_key("cm") == ("name", "cm")  # nothing loaded yet: no I/O
        await api.resource("configmaps")
        assert api.resource_key("cm") == api.resource_key(CONFIGMAPS) == ("", "v1", "ConfigMap")
