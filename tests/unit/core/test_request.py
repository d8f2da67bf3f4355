"""Request building: golden paths and query strings for every verb, no server involved."""

from __future__ import annotations

import orjson
import pytest

from kubeop.core.patch import PatchType
from kubeop.core.request import ApiRequest, RequestBuilder
from kubeop.core.resource import ApiResource
from kubeop.core.selectors import LabelSelector

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
DEPLOY = ApiResource("apps", "v1", "deployments", kind="Deployment")
NODES = ApiResource("", "v1", "nodes", kind="Node", namespaced=False)
CRD_KIND = ApiResource("example.com", "v1alpha1", "widgets", kind="Widget")
CLUSTER_CRD = ApiResource("example.com", "v1", "clusterwidgets", kind="ClusterWidget", namespaced=False)


@pytest.mark.parametrize(
    ("resource", "namespace", "name", "subresource", "path"),
    [
        (CM, "ns", "x", None, "/api/v1/namespaces/ns/configmaps/x"),
        (DEPLOY, "ns", "web", None, "/apis/apps/v1/namespaces/ns/deployments/web"),
        (DEPLOY, "ns", "web", "scale", "/apis/apps/v1/namespaces/ns/deployments/web/scale"),
        (CRD_KIND, "ns", "w", "status", "/apis/example.com/v1alpha1/namespaces/ns/widgets/w/status"),
        (NODES, None, "n1", None, "/api/v1/nodes/n1"),
        (NODES, "ignored", "n1", "status", "/api/v1/nodes/n1/status"),
        (CLUSTER_CRD, None, "c", None, "/apis/example.com/v1/clusterwidgets/c"),
        (
            ApiResource("rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False),
            None,
            "system:controller:x",
            None,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:controller:x",
        ),
    ],
)
def test_get_paths(
    resource: ApiResource, namespace: str | None, name: str, subresource: str | None, path: str
) -> None:
    req = RequestBuilder(resource, namespace).get(name, subresource=subresource)
    assert (req.method, req.url) == ("GET", path)
    assert req.idempotent


def test_list_all_namespaces_and_query() -> None:
    req = RequestBuilder(CM).list(
        label_selector={"app": "web"},
        field_selector="metadata.name=x",
        limit=500,
        resource_version="0",
        resource_version_match="NotOlderThan",
        timeout_seconds=30,
    )
    assert req.path == "/api/v1/configmaps"
    assert req.query == (
        ("labelSelector", "app=web"),
        ("fieldSelector", "metadata.name=x"),
        ("limit", "500"),
        ("resourceVersion", "0"),
        ("resourceVersionMatch", "NotOlderThan"),
        ("timeoutSeconds", "30"),
    )
    assert req.url.startswith("/api/v1/configmaps?labelSelector=app%3Dweb&fieldSelector=metadata.name%3Dx")


def test_list_continue_and_selector_object() -> None:
    req = RequestBuilder(DEPLOY, "ns").list(
        label_selector=LabelSelector.parse("a in (x,y)"), continue_="tok", limit=2
    )
    assert req.path == "/apis/apps/v1/namespaces/ns/deployments"
    assert dict(req.query) == {"labelSelector": "a in (x,y)", "continue": "tok", "limit": "2"}


def test_list_validation() -> None:
    with pytest.raises(ValueError, match="resource_version_match needs"):
        RequestBuilder(CM, "ns").list(resource_version_match="Exact")
    with pytest.raises(ValueError, match="exclusive"):
        RequestBuilder(CM, "ns").list(continue_="t", resource_version="5")
    with pytest.raises(ValueError, match="positive"):
        RequestBuilder(CM, "ns").list(limit=0)


def test_watch_query() -> None:
    req = RequestBuilder(CM, "ns").watch(resource_version="10", timeout_seconds=60)
    assert req.stream and req.method == "GET"
    assert req.path == "/api/v1/namespaces/ns/configmaps"
    assert req.query == (
        ("watch", "true"),
        ("resourceVersion", "10"),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", "60"),
    )


def test_watch_streaming_list_sets_required_params() -> None:
    req = RequestBuilder(CM).watch(send_initial_events=True, allow_bookmarks=False)
    q = dict(req.query)
    assert q["sendInitialEvents"] == "true"
    assert q["allowWatchBookmarks"] == "true"
    assert q["resourceVersionMatch"] == "NotOlderThan"


def test_watch_one_object_by_name() -> None:
    req = RequestBuilder(CM, "ns").watch(name="x", field_selector="a=b", allow_bookmarks=False)
    assert dict(req.query) == {"watch": "true", "fieldSelector": "a=b,metadata.name=x"}


def test_create_replace_patch_delete() -> None:
    b = RequestBuilder(CM, "ns")
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    create = b.create(body, dry_run=True, field_manager="me", field_validation="Strict")
    assert (create.method, create.path) == ("POST", "/api/v1/namespaces/ns/configmaps")
    assert create.query == (("dryRun", "All"), ("fieldManager", "me"), ("fieldValidation", "Strict"))
    assert orjson.loads(create.body or b"") == body
    assert create.content_type == "application/json"
    assert create.idempotent  # dry-run writes change nothing, so retries are safe
    assert create.target == 'configmaps "x" in namespace "ns"'

    put = b.replace("x", body, subresource="status")
    assert (put.method, put.path, put.query) == ("PUT", "/api/v1/namespaces/ns/configmaps/x/status", ())
    assert not put.idempotent

    patch = b.patch("x", [{"op": "add", "path": "/data", "value": {}}], PatchType.JSON)
    assert patch.content_type == "application/json-patch+json"
    apply = b.patch("x", body, PatchType.APPLY, field_manager="ctl", force=True)
    assert apply.content_type == "application/apply-patch+yaml"
    assert apply.query == (("fieldManager", "ctl"), ("force", "true"))
    strategic = b.patch("x", {}, PatchType.STRATEGIC)
    assert strategic.content_type == "application/strategic-merge-patch+json"
    assert b.patch("x", {}).content_type == "application/merge-patch+json"

    delete = b.delete(
        "x",
        propagation_policy="Foreground",
        precondition_uid="u1",
        precondition_resource_version="7",
        dry_run=True,
    )
    assert (delete.method, delete.path, delete.query) == (
        "DELETE",
        "/api/v1/namespaces/ns/configmaps/x",
        (("dryRun", "All"),),
    )
    assert orjson.loads(delete.body or b"") == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Foreground",
        "preconditions": {"uid": "u1", "resourceVersion": "7"},
        "dryRun": ["All"],
    }


def test_delete_collection() -> None:
    req = RequestBuilder(CM, "ns").delete_collection(
        label_selector="app=web", propagation_policy="Background"
    )
    assert (req.method, req.path) == ("DELETE", "/api/v1/namespaces/ns/configmaps")
    assert req.query == (("labelSelector", "app=web"),)
    assert orjson.loads(req.body or b"")["propagationPolicy"] == "Background"
    with pytest.raises(ValueError, match="needs a namespace"):
        RequestBuilder(CM).delete_collection()
    assert RequestBuilder(NODES).delete_collection().path == "/api/v1/nodes"


def test_subresource_create_eviction() -> None:
    pods = ApiResource("", "v1", "pods", kind="Pod")
    req = RequestBuilder(pods, "ns").create(
        {"apiVersion": "policy/v1", "kind": "Eviction"}, subresource_of="p", subresource="eviction"
    )
    assert req.path == "/api/v1/namespaces/ns/pods/p/eviction"


@pytest.mark.parametrize("name", ["", "a/b", ".", ".."])
def test_bad_names(name: str) -> None:
    with pytest.raises(ValueError):
        RequestBuilder(CM, "ns").get(name)


def test_namespaced_single_object_needs_namespace() -> None:
    with pytest.raises(ValueError, match="namespaced"):
        RequestBuilder(CM).get("x")
    with pytest.raises(ValueError, match="namespace"):
        RequestBuilder(CM).create({"metadata": {"name": "x"}})


def test_patch_validation() -> None:
    b = RequestBuilder(CM, "ns")
    with pytest.raises(ValueError, match="field_manager"):
        b.patch("x", {}, PatchType.APPLY)
    with pytest.raises(ValueError, match="force"):
        b.patch("x", {}, PatchType.MERGE, force=True)
    with pytest.raises(ValueError, match="list of operations"):
        b.patch("x", {"op": "add"}, PatchType.JSON)


def test_request_str() -> None:
    assert str(ApiRequest("GET", "/api", (("a", "b c"),))) == "GET /api?a=b+c"
