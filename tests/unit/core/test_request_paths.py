"""Hardening #12 (2, 7): nothing a caller passes can change the request line or the path's meaning.

Names, namespaces, subresources, group/version/plural and hand-made paths are checked before a
request exists; query values are always percent-encoded.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeop.client.client import Client
from kubeop.client.discovery import Discovery
from kubeop.core.patch import PatchType
from kubeop.core.request import ApiRequest, RequestBuilder
from kubeop.core.resource import ApiResource

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
PODS = ApiResource("", "v1", "pods", kind="Pod")
NODES = ApiResource("", "v1", "nodes", kind="Node", namespaced=False)

SMUGGLED = (
    "status HTTP/1.1\r\nHost: x\r\n\r\n"
    "DELETE /api/v1/namespaces/kube-system/secrets/all HTTP/1.1\r\nHost: x\r\n\r\n"
)
LONG = "a" * 100_000

# Values no path segment may carry, whatever the field.
ADVERSARIAL = [
    pytest.param("a\r\nb", id="crlf"),
    pytest.param("a\nb", id="lf"),
    pytest.param("a\rb", id="cr"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("a\tb", id="tab"),
    pytest.param("a\x7fb", id="del"),
    pytest.param("a b", id="space"),
    pytest.param("a\u00a0b", id="nbsp"),
    pytest.param("a\u2028b", id="line-separator"),
    pytest.param("a\u200bb", id="zero-width-space"),
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param("..", id="dotdot"),
    pytest.param(".", id="dot"),
    pytest.param("%2e%2e", id="encoded-dotdot"),
    pytest.param("%2E", id="encoded-dot"),
    pytest.param("a%2Fb", id="encoded-slash"),
    pytest.param("a/b", id="slash"),
    pytest.param("../../secrets", id="traversal"),
    pytest.param(SMUGGLED, id="smuggled-request"),
    pytest.param(" " + LONG, id="very-long-bad"),
]


def _no_raw_specials(text: str) -> None:
    """A request line part: printable ASCII without spaces only."""
    assert re.fullmatch(r"[\x21-\x7e]*", text), text[:200]


# -- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ADVERSARIAL)
@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda b, n: b.get(n), id="get"),
        pytest.param(lambda b, n: b.replace(n, {}), id="replace"),
        pytest.param(lambda b, n: b.patch(n, {}), id="patch"),
        pytest.param(lambda b, n: b.delete(n), id="delete"),
        pytest.param(lambda b, n: b.watch(name=n), id="watch"),
        pytest.param(lambda b, n: b.create({}, subresource_of=n, subresource="eviction"), id="create-sub"),
    ],
)
def test_bad_names_are_refused(build: Callable[[RequestBuilder, str], ApiRequest], bad: str) -> None:
    with pytest.raises(ValueError, match=r"configmaps: invalid name .*: must be an object name") as info:
        build(RequestBuilder(CM, "ns"), bad)
    assert len(str(info.value)) < 300, "the bad value is shown truncated"
    assert "\r" not in str(info.value) and "\n" not in str(info.value)


def test_empty_and_non_string_names() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        RequestBuilder(CM, "ns").get("")
    with pytest.raises(ValueError, match="invalid name bytes"):
        RequestBuilder(CM, "ns").get(b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid name NoneType"):
        RequestBuilder(CM, "ns").patch(None, {})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "segment"),
    [
        ("web-1", "web-1"),
        ("a..b", "a..b"),
        ("...", "..."),
        (".hidden", ".hidden"),
        ("system:controller:x", "system:controller:x"),
        ("user@example.com", "user@example.com"),
        ("Upper_Case", "Upper_Case"),
        ("a+b=c", "a%2Bb%3Dc"),
        ("ünïcödé", "%C3%BCn%C3%AFc%C3%B6d%C3%A9"),
        ("名前", "%E5%90%8D%E5%89%8D"),
        ("x" * 253, "x" * 253),
        (LONG, LONG),
    ],
)
def test_any_name_the_api_allows_is_encoded_into_one_segment(name: str, segment: str) -> None:
    req = RequestBuilder(CM, "ns").get(name)
    assert req.path == f"/api/v1/namespaces/ns/configmaps/{segment}"
    assert ApiRequest(req.method, req.path) == ApiRequest("GET", req.path)  # a hand-made copy passes too


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_a_name_is_refused_or_becomes_exactly_one_segment(name: str) -> None:
    try:
        req = RequestBuilder(CM, "ns").get(name, subresource="status")
    except ValueError:
        return
    prefix, segment, sub = req.path.rsplit("/", 2)
    assert prefix == "/api/v1/namespaces/ns/configmaps" and sub == "status"
    assert unquote(segment) == name
    _no_raw_specials(req.url)
    ApiRequest(req.method, req.path)


# -- namespaces ------------------------------------------------------------------------------------

NAMESPACE_VERBS = [
    pytest.param(lambda b: b.list(), id="list"),
    pytest.param(lambda b: b.watch(), id="watch"),
    pytest.param(lambda b: b.get("x"), id="get"),
    pytest.param(lambda b: b.create({"metadata": {"name": "x"}}), id="create"),
    pytest.param(lambda b: b.replace("x", {}), id="replace"),
    pytest.param(lambda b: b.patch("x", {}, PatchType.APPLY, field_manager="m"), id="apply"),
    pytest.param(lambda b: b.delete("x"), id="delete"),
    pytest.param(lambda b: b.delete_collection(), id="delete_collection"),
]


@pytest.mark.parametrize(
    "bad",
    [
        *ADVERSARIAL,
        pytest.param("Default", id="uppercase"),
        pytest.param("-ns", id="leading-dash"),
        pytest.param("ns-", id="trailing-dash"),
        pytest.param("a.b", id="dotted"),
        pytest.param("ns/pods", id="extra-segment"),
        pytest.param("ünï", id="unicode"),
        pytest.param("a" * 64, id="64-chars"),
    ],
)
@pytest.mark.parametrize("build", NAMESPACE_VERBS)
def test_bad_namespaces_are_refused_for_every_verb(
    build: Callable[[RequestBuilder], ApiRequest], bad: str
) -> None:
    """'..' would make a path-normalising proxy turn a namespaced request into a cluster-wide one."""
    with pytest.raises(ValueError, match=r"invalid namespace .*: must be a DNS-1123 label") as info:
        build(RequestBuilder(CM, bad))
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("ns", ["a", "0", "kube-system", "a" * 63, "1-2-3"])
def test_dns_label_namespaces_are_accepted(ns: str) -> None:
    assert RequestBuilder(CM, ns).list().path == f"/api/v1/namespaces/{ns}/configmaps"


def test_a_cluster_scoped_resource_ignores_the_namespace_it_never_uses() -> None:
    assert RequestBuilder(NODES, "..").get("n1").path == "/api/v1/nodes/n1"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_a_namespace_is_a_dns_label_or_refused(ns: str) -> None:
    try:
        req = RequestBuilder(CM, ns).list()
    except ValueError:
        assert not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", ns)
        return
    assert ns == "" or req.path == f"/api/v1/namespaces/{ns}/configmaps"


# -- subresources ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        *(p for p in ADVERSARIAL if p.id != "slash"),  # "a/b" is a subresource path ("proxy/metrics")
        pytest.param("Status", id="uppercase"),
        pytest.param("status/", id="trailing-slash"),
        pytest.param("/status", id="leading-slash"),
        pytest.param("proxy/a/b", id="three-segments"),
        pytest.param("1status", id="leading-digit"),
        pytest.param("stätus", id="unicode"),
        pytest.param("status?dryRun=All", id="query"),
        pytest.param("status#x", id="fragment"),
        pytest.param("s" * 64, id="64-chars"),
    ],
)
@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda b, s: b.get("x", subresource=s), id="get"),
        pytest.param(lambda b, s: b.replace("x", {}, subresource=s), id="replace"),
        pytest.param(lambda b, s: b.patch("x", {}, subresource=s), id="patch"),
        pytest.param(lambda b, s: b.create({}, subresource_of="x", subresource=s), id="create"),
    ],
)
def test_bad_subresources_are_refused(build: Callable[[RequestBuilder, str], ApiRequest], bad: str) -> None:
    with pytest.raises(ValueError, match=r"invalid subresource .*: must be a lowercase path name") as info:
        build(RequestBuilder(PODS, "ns"), bad)
    assert len(str(info.value)) < 400


def test_the_smuggled_request_of_issue_12_is_refused() -> None:
    with pytest.raises(ValueError, match=r"invalid subresource 'status HTTP/1\.1"):
        RequestBuilder(CM, "ns").get("x", subresource=SMUGGLED)


@pytest.mark.parametrize(
    "sub", ["status", "scale", "eviction", "binding", "log", "exec", "ephemeralcontainers", "proxy/metrics"]
)
def test_real_subresources_are_accepted(sub: str) -> None:
    assert RequestBuilder(PODS, "ns").get("p", subresource=sub).path == f"/api/v1/namespaces/ns/pods/p/{sub}"


# -- group, version, plural ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"group": ".."},
        {"group": "example.com/../.."},
        {"group": "Example.com"},
        {"group": "a\r\nb"},
        {"group": "a" * 254},
        {"version": ""},
        {"version": ".."},
        {"version": "v1 HTTP/1.1"},
        {"version": "v1/x"},
        {"plural": ""},
        {"plural": "."},
        {"plural": ".."},
        {"plural": "widgets/x"},
        {"plural": "wid%67ets"},
        {"plural": "widgets\n"},
        {"plural": "w" * 254},
    ],
)
def test_api_resources_that_cannot_be_path_segments_are_refused(change: dict[str, str]) -> None:
    fields: dict[str, Any] = {"group": "example.com", "version": "v1", "plural": "widgets", **change}
    (field,) = change
    label = {"group": "API group", "version": "API version", "plural": r"resource \(plural\)"}[field]
    with pytest.raises(ValueError, match=f"invalid {label} "):
        ApiResource(**fields)


def test_dataclass_replace_is_checked_too() -> None:
    with pytest.raises(ValueError, match="invalid API version"):
        dataclasses.replace(CM, version="../v1")


@pytest.mark.parametrize(
    ("group", "version", "plural"),
    [
        ("", "v1", "configmaps"),
        ("apps", "v1", "deployments"),
        ("rbac.authorization.k8s.io", "v1", "clusterroles"),
        ("example.com", "v1alpha1", "widgets"),
        ("x-y.example.com", "v2beta3", "my_metrics"),
    ],
)
def test_real_api_resources_are_accepted(group: str, version: str, plural: str) -> None:
    ApiResource(group, version, plural)


# -- hand-made requests ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/../secrets",
        "/api/v1/namespaces/./secrets",
        "/api/v1/namespaces/%2e%2e/secrets",
        "/api/v1/namespaces/.%2E/secrets",
        "/api/v1/namespaces/%2E/secrets",
        "/api/v1/namespaces/a%2Fb/secrets",
        "/api/v1/namespaces/a%0d%0ab/secrets",
        "/api/v1//secrets",
        "/..",
        "/api/v1/x y",
        "/api/v1/x\r\nAuthorization: x",
        "/api/v1/x\x00",
        "/api/v1/x\t",
        "/api/v1/pods?limit=1",
        "/api/v1/pods#frag",
        "/api/v1/pods\\..\\secrets",
        "/api/v1/pödß",
        "/api/v1/%zz",
        "/api/v1/%2",
        "api/v1/pods",
        "",
        "http://evil/api",
        "/" + SMUGGLED,
        "/" + LONG + " ",
    ],
)
def test_hand_made_request_paths_are_checked(path: str) -> None:
    with pytest.raises(ValueError, match="invalid request path") as info:
        ApiRequest("GET", path)
    assert len(str(info.value)) < 600


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/api",
        "/apis/",
        "/readyz",
        "/openapi/v3/apis/apps/v1",
        "/api/v1/namespaces/ns/configmaps/system:x",
        "/api/v1/namespaces/ns/configmaps/%C3%BC",
        "/api/v1/namespaces/ns/configmaps/a%20b",
        "/api/v1/namespaces/ns/configmaps/...",
        "/api/v1/namespaces/ns/configmaps/.hidden",
        "/" + LONG,
    ],
)
def test_good_hand_made_paths_pass(path: str) -> None:
    assert ApiRequest("GET", path).path == path


@pytest.mark.parametrize("method", ["GET /x HTTP/1.1\r\nX:", "get", "GE T", "", "G\x00"])
def test_hand_made_request_methods_are_checked(method: str) -> None:
    with pytest.raises(ValueError, match="invalid request method"):
        ApiRequest(method, "/api")


def test_builder_requests_equal_hand_made_ones() -> None:
    """The builder skips ApiRequest's own path check (its segments are checked); nothing else differs."""
    b = RequestBuilder(CM, "ns")
    for req in (
        b.get("x", subresource="status"),
        b.list(label_selector="a=b", limit=5),
        b.watch(resource_version="5"),
        b.create({"metadata": {"name": "x"}}, dry_run=True),
        b.replace("x", {}),
        b.patch("x", [], PatchType.JSON, field_manager="m"),
        b.delete("x", propagation_policy="Background"),
        b.delete_collection(label_selector="a"),
    ):
        copy = ApiRequest(**{f.name: getattr(req, f.name) for f in dataclasses.fields(ApiRequest)})
        assert copy == req and repr(copy) == repr(req) and hash(copy) == hash(req)


# -- query values ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    labels=st.text(),
    fields=st.text(),
    rv=st.text(),
    token=st.text(),
    manager=st.text(min_size=1),
)
def test_query_values_never_reach_the_request_line_unencoded(
    labels: str, fields: str, rv: str, token: str, manager: str
) -> None:
    b = RequestBuilder(CM, "ns")
    for req in (
        b.list(label_selector=labels, field_selector=fields, resource_version=rv or None),
        b.list(continue_=token),
        b.watch(label_selector=labels, field_selector=fields, resource_version=rv),
        b.get("x", resource_version=rv),
        b.patch("x", {}, field_manager=manager),
        b.delete_collection(label_selector=labels, field_selector=fields),
        ApiRequest("GET", "/api", ((labels, fields), ("rv", rv))),
    ):
        _no_raw_specials(req.url)


# -- namespaces from objects and configuration (Client) ---------------------------------------------


class _Transport:
    def __init__(self, namespace: str = "default") -> None:
        self.config = SimpleNamespace(namespace=namespace, server="https://fake")
        self.sent: list[ApiRequest] = []

    async def request(self, req: ApiRequest) -> Any:
        self.sent.append(req)
        return {"metadata": {}, "items": []}


def _client(namespace: str = "default") -> tuple[Client, _Transport]:
    transport = _Transport(namespace)
    return Client(transport=transport, discovery=Discovery(transport)), transport  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "a b", "kube-system/../x"])
async def test_a_namespace_from_the_object_is_checked(bad: str) -> None:
    client, transport = _client()
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": bad}}
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: client.create(obj, resource=CM),
        lambda: client.update(obj, resource=CM),
        lambda: client.update_status(obj, resource=CM),
        lambda: client.apply(obj, field_manager="m", resource=CM),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="invalid namespace"):
            await call()
    assert transport.sent == []


@pytest.mark.parametrize("bad", ["..", "."])
async def test_a_namespace_from_arguments_or_configuration_is_checked(bad: str) -> None:
    client, transport = _client()
    with pytest.raises(ValueError, match="invalid namespace"):
        await client.list(CM, namespace=bad)
    with pytest.raises(ValueError, match="invalid namespace"):
        await client.delete_collection(CM, namespace=bad)
    with pytest.raises(ValueError, match="invalid namespace"):
        await client.get(CM, "x", namespace=bad)
    configured, transport2 = _client(namespace=bad)  # e.g. from a kubeconfig context
    with pytest.raises(ValueError, match="invalid namespace"):
        await configured.list(CM)
    assert transport.sent == [] and transport2.sent == []
    await client.list(CM, all_namespaces=True)  # no namespace in the path: nothing to check
    assert transport.sent[0].path == "/api/v1/configmaps"


async def test_a_hand_made_request_is_checked_before_it_is_sent() -> None:
    client, transport = _client()
    with pytest.raises(ValueError, match="invalid request path"):
        await client.request(ApiRequest("GET", "/api/v1/namespaces/../secrets"))
    assert transport.sent == []


# -- discovery: group/version/plural names from the server -----------------------------------------


async def test_discovery_skips_names_that_cannot_be_path_segments(caplog: pytest.LogCaptureFixture) -> None:
    class Legacy(_Transport):
        async def request(self, req: ApiRequest) -> Any:
            self.sent.append(req)
            if req.path == "/api":
                return {"kind": "APIVersions", "versions": ["v1", "../v1"]}
            if req.path == "/apis":
                return {
                    "groups": [
                        {"name": "good.example.com", "versions": [{"version": "v1"}, {"version": "v1 x"}]},
                        {"name": "../..", "versions": [{"version": "v1"}]},
                        {"name": "", "versions": [{"version": "v1"}]},
                    ]
                }
            if req.path == "/apis/good.example.com/v1":
                return {"resources": [{"name": "things", "kind": "Thing"}, {"name": "..", "kind": "Bad"}]}
            return {"resources": [{"name": "configmaps", "kind": "ConfigMap", "namespaced": True}]}

    transport = Legacy()
    discovery = Discovery(transport)  # type: ignore[arg-type]
    mapper = await discovery.mapper()
    assert sorted(r.path for r in transport.sent) == [
        "/api",
        "/api/v1",
        "/apis",
        "/apis/good.example.com/v1",
    ]
    assert mapper.find("things") is not None and mapper.find("configmaps") is not None
    assert "skipping" in caplog.text


async def test_aggregated_discovery_skips_names_that_cannot_be_path_segments() -> None:
    def group(name: str, version: str, plural: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name},
            "versions": [
                {
                    "version": version,
                    "resources": [{"resource": plural, "responseKind": {"kind": "K"}, "scope": "Namespaced"}],
                }
            ],
        }

    class Aggregated(_Transport):
        async def request(self, req: ApiRequest) -> Any:
            items = (
                [group("", "v1", "configmaps"), group("", "../v1", "secrets")]
                if req.path == "/api"
                else [group("ok.io", "v1", "things"), group("..", "v1", "x"), group("ok2.io", "v1", "a/b")]
            )
            return {"kind": "APIGroupDiscoveryList", "items": items}

    mapper = await Discovery(Aggregated()).mapper()  # type: ignore[arg-type]
    found = [mapper.find(n) for n in ("configmaps", "things", "secrets", "x", "a/b")]
    assert [r.plural if r else None for r in found] == ["configmaps", "things", None, None, None]
