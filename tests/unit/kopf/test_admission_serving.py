"""kopf's admission servers and managed webhook configurations: the objects kubeop.kopf writes,
their names, the settings' checks, and kopf.WebhookServer answering over real TLS (no cluster)."""

from __future__ import annotations

import asyncio
import base64
import http.client
import ssl
from typing import Any

import orjson
import pytest

import kubeop.kopf as kopf
from kubeop.core.resource import ApiResource
from kubeop.kopf.admission import admission_fn, admission_handlers
from kubeop.kopf.serving import build_webhooks, object_selector, webhook_name
from kubeop.kopf.webhooks import WebhookUnknown

KEX = ApiResource("kopf.dev", "v1", "kopfexamples", kind="KopfExample")


def authhook(**_: Any) -> None: ...
def validate2(**_: Any) -> None: ...
def validate_subresources(**_: Any) -> None: ...
def mutate1(**_: Any) -> None: ...


def example_registry() -> kopf.Registry:
    """17-admission's handlers (module-level functions: their ids are their names), and more options."""
    reg = kopf.Registry()
    kopf.on.validate("kex", registry=reg)(authhook)
    kopf.on.validate("kex", registry=reg, field="spec.field", value="not-allowed")(validate2)
    kopf.on.validate("kex", registry=reg, subresource="*", operations=["UPDATE"])(validate_subresources)
    kopf.on.mutate("kex", registry=reg, labels={"somelabel": "somevalue", "gone": kopf.ABSENT})(mutate1)
    kopf.on.validate(
        "kex", registry=reg, id="keep/me", persistent=True, ignore_failures=True, side_effects=True
    )(lambda **_: None)
    return reg


def test_one_webhook_per_handler_with_kopfs_names_rules_and_policies() -> None:
    handlers = admission_handlers(example_registry())
    config = kopf.WebhookClientConfig(url="https://localhost:1234/root/", caBundle="Q0E=")
    hooks = build_webhooks(
        [h for h in handlers if not h.mutating],
        resources={"kex": KEX},
        name_suffix="auto.kopf.dev",
        client_config=config,
    )
    by_name = {h["name"]: h for h in hooks}
    assert list(by_name) == [
        "authhook.auto.kopf.dev",
        "validate2.auto.kopf.dev",
        "validate-subresources.auto.kopf.dev",
        "keep.me.auto.kopf.dev",
    ]
    auth = by_name["authhook.auto.kopf.dev"]
    assert auth == {
        "name": "authhook.auto.kopf.dev",
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "rules": [
            {
                "apiGroups": ["kopf.dev"],
                "apiVersions": ["v1"],
                "resources": ["kopfexamples"],
                "operations": ["*"],
                "scope": "*",
            }
        ],
        "clientConfig": {"url": "https://localhost:1234/root/authhook", "caBundle": "Q0E="},
        "timeoutSeconds": 30,
        "admissionReviewVersions": ["v1"],
    }
    subs = by_name["validate-subresources.auto.kopf.dev"]["rules"][0]
    assert subs["resources"] == ["kopfexamples/*"] and subs["operations"] == ["UPDATE"]
    kept = by_name["keep.me.auto.kopf.dev"]
    assert (kept["failurePolicy"], kept["sideEffects"]) == ("Ignore", "NoneOnDryRun")
    assert kept["clientConfig"]["url"] == "https://localhost:1234/root/keep/me", "the id, URL-quoted"

    persistent = build_webhooks(
        handlers,
        resources={"kex": KEX},
        name_suffix="auto.kopf.dev",
        client_config=config,
        persistent_only=True,
    )
    assert [h["name"] for h in persistent] == ["keep.me.auto.kopf.dev"], "what a cleanup leaves"

    (mutate,) = build_webhooks(
        [h for h in handlers if h.mutating],
        resources={"kex": KEX},
        name_suffix="auto.kopf.dev",
        client_config=kopf.WebhookClientConfig(service={"name": "op", "namespace": "ns", "path": "/hooks"}),
    )
    assert mutate["clientConfig"] == {"service": {"name": "op", "namespace": "ns", "path": "/hooks/mutate1"}}
    assert mutate["objectSelector"] == {
        "matchExpressions": [
            {"key": "somelabel", "operator": "In", "values": ["somevalue"]},
            {"key": "gone", "operator": "DoesNotExist"},
        ]
    }


def test_object_selector_skips_callables_and_maps_present() -> None:
    assert object_selector(None) is None
    assert object_selector({"a": lambda value, **_: True}) is None
    assert object_selector({"a": kopf.PRESENT}) == {"matchExpressions": [{"key": "a", "operator": "Exists"}]}


def test_webhook_names_are_dns_names_or_an_error_naming_the_handler() -> None:
    assert webhook_name("create_fn", "auto.kopf.dev") == "create-fn.auto.kopf.dev"
    assert webhook_name("Outer.Inner/sub_1", "x.dev") == "outer.inner.sub-1.x.dev"
    assert webhook_name("a b", "x.dev") == "a20b.x.dev", "other characters hex-encoded, as kopf"
    with pytest.raises(ValueError, match=r"admission handler '-bad' .* give the handler id="):
        webhook_name("-bad", "x.dev")
    with pytest.raises(ValueError, match="not a DNS name"):
        webhook_name("x" * 64, "x.dev")

    reg = kopf.Registry()
    kopf.on.validate("kex", registry=reg, id="a_b")(lambda **_: None)
    kopf.on.validate("kex", registry=reg, id="a-b")(lambda **_: None)
    with pytest.raises(ValueError, match=r"'a_b' and 'a-b' both make the webhook name 'a-b.x.dev'"):
        build_webhooks(admission_handlers(reg), resources={"kex": KEX}, name_suffix="x.dev", client_config={})


@pytest.mark.parametrize("bad", ["Auto.Kopf.dev", "single", "a..b", "-a.b", "a_b.dev", "x" * 64 + ".dev"])
def test_managed_must_be_a_name_the_webhooks_can_end_with(bad: str) -> None:
    settings = kopf.OperatorSettings()
    with pytest.raises(ValueError, match=rf"settings.admission.managed={bad!r} .* such as 'auto.kopf.dev'"):
        settings.admission.managed = bad
    settings.admission.managed = "auto.kopf.dev"
    settings.admission.managed = None
    with pytest.raises(TypeError, match=r"settings\.admission\.managed=3"):
        settings.admission.managed = 3  # type: ignore[assignment]


def test_server_must_be_a_server_instance() -> None:
    settings = kopf.OperatorSettings()
    with pytest.raises(
        TypeError, match=r"the class WebhookServer; give an instance: .*kopf.WebhookServer\(\)"
    ):
        settings.admission.server = kopf.WebhookServer
    with pytest.raises(TypeError, match=r"settings.admission.server='auto' is not a webhook server"):
        settings.admission.server = "auto"
    for server in (
        kopf.WebhookServer(port=1234),
        kopf.WebhookAutoServer(),
        kopf.WebhookAutoTunnel(),
        kopf.WebhookK3dServer(),
        kopf.WebhookMinikubeServer(port=1234),
        kopf.WebhookDockerDesktopServer(),
        kopf.WebhookNgrokTunnel(path="/xyz", port=1234),
    ):
        settings.admission.server = server  # constructing and setting any of kopf's is fine
    with pytest.raises(AttributeError):
        settings.admission.servers = None


def test_server_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="certfile= and pkeyfile= go together"):
        kopf.WebhookServer(certfile="/tmp/cert.pem")
    with pytest.raises(ValueError, match=r"WebhookServer\(port=70000\)"):
        kopf.WebhookServer(port=70000)


async def test_unbuilt_and_unsupported_servers_say_what_to_use() -> None:
    fn = admission_fn([], memo={})
    with pytest.raises(NotImplementedError, match=r"WebhookNgrokTunnel.*kopf.WebhookAutoServer\(\)"):
        await anext(kopf.WebhookNgrokTunnel()(fn))
    with pytest.raises(TypeError, match=r"context=.*certfile=/pkeyfile="):
        await anext(kopf.WebhookServer(context=ssl.create_default_context())(fn))
    with pytest.raises(ValueError, match=r"WebhookServer: certfile= and pkeyfile= go together"):
        await anext(kopf.WebhookServer(certfile="/nonexistent/tls.crt")(fn))


def review(**spec: Any) -> dict[str, Any]:
    obj = {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "x"}, "spec": spec}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "kopf.dev", "version": "v1", "kind": "KopfExample"},
            "resource": {"group": "kopf.dev", "version": "v1", "resource": "kopfexamples"},
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": obj,
        },
    }


async def test_webhook_server_serves_kopfs_paths_over_tls_with_headers_and_sslpeer() -> None:
    reg = kopf.Registry()
    seen: list[tuple[Any, Any]] = []

    @kopf.on.validate("kex", registry=reg, id="authhook")
    def check(headers: kopf.Headers, sslpeer: kopf.SSLPeer, spec: kopf.Spec, **_: Any) -> None:
        seen.append((headers.get("User-Agent"), sslpeer))
        if spec.get("field") == "wrong":
            raise kopf.AdmissionError("Meh!", code=555)

    fn = admission_fn(admission_handlers(reg), memo={})
    with pytest.raises(WebhookUnknown, match=r"no admission handler 'nope' \(the handlers: authhook\)"):
        await fn(review(), webhook="nope")

    before = asyncio.all_tasks()
    server = kopf.WebhookServer(addr="127.0.0.1", path="/root/")
    configs = server(fn)
    config = await anext(configs)
    try:
        url = config["url"]
        assert url is not None and url.startswith("https://127.0.0.1:") and url.endswith("/root")
        ca = base64.b64decode(config["caBundle"] or "").decode()
        port = int(url.split(":")[2].split("/")[0])

        def post(path: str, body: bytes) -> tuple[int, bytes]:
            ctx = ssl.create_default_context(cadata=ca)
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
            try:
                conn.request(
                    "POST",
                    path,
                    body,
                    {"Content-Type": "application/json", "User-Agent": "kube-apiserver-test"},
                )
                response = conn.getresponse()
                return response.status, response.read()
            finally:
                conn.close()

        status, body = await asyncio.to_thread(post, "/root/authhook", orjson.dumps(review(field="wrong")))
        assert status == 200
        answer = orjson.loads(body)["response"]
        assert answer["allowed"] is False and answer["status"]["code"] == 555 and answer["uid"] == "u1"
        assert seen == [("kube-apiserver-test", {})], "headers as sent; no client certificate asked"
        assert (await asyncio.to_thread(post, "/root/nope", orjson.dumps(review())))[0] == 404
        assert (await asyncio.to_thread(post, "/other/authhook", orjson.dumps(review())))[0] == 404
        assert (await asyncio.to_thread(post, "/root/authhook", b"{oops"))[0] == 400
    finally:
        await configs.aclose()
    left = [t for t in asyncio.all_tasks() - before if not t.done() and t is not asyncio.current_task()]
    assert not left, "closing the server's generator stops the server there and then"


def client_certificate(ca: Any, common_name: str) -> tuple[bytes, bytes]:
    """A client certificate (clientAuth) signed by ``ca`` (a kubeop.webhook.certs.KeyPair)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key(), hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), pem_key


async def test_given_certificate_and_verified_client_certificate_reach_sslpeer(tmp_path: Any) -> None:
    from kubeop.webhook.certs import make_ca, make_serving

    ca = make_ca()
    serving = make_serving(ca, ["127.0.0.1"])
    (tmp_path / "cert.pem").write_bytes(serving.cert_pem)
    (tmp_path / "key.pem").write_bytes(serving.key_pem)
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem)
    client_cert, client_key = client_certificate(ca, "kube-apiserver-client")
    (tmp_path / "client.pem").write_bytes(client_cert + client_key)

    reg = kopf.Registry()
    peers: list[Any] = []
    kopf.on.validate("kex", registry=reg, id="who")(lambda sslpeer, **_: peers.append(sslpeer))
    server = kopf.WebhookServer(
        addr="127.0.0.1",
        certfile=tmp_path / "cert.pem",
        pkeyfile=tmp_path / "key.pem",
        cafile=tmp_path / "ca.pem",
        cadump=tmp_path / "dumped.pem",
        verify_cafile=tmp_path / "ca.pem",
    )
    configs = server(admission_fn(admission_handlers(reg), memo={}))
    config = await anext(configs)
    try:
        assert base64.b64decode(config["caBundle"] or "") == ca.cert_pem, "cafile= is the caBundle"
        assert (tmp_path / "dumped.pem").read_bytes() == ca.cert_pem
        port = int((config["url"] or "").rsplit(":", 1)[1])

        def post(with_client_cert: bool) -> int:
            ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
            if with_client_cert:
                ctx.load_cert_chain(tmp_path / "client.pem")
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
            try:
                conn.request("POST", "/who", orjson.dumps(review()), {"Content-Type": "application/json"})
                return conn.getresponse().status
            finally:
                conn.close()

        assert await asyncio.to_thread(post, True) == 200
        assert await asyncio.to_thread(post, False) == 200, "optional: a caller without one is served"
        subject = dict(pair[0] for pair in peers[0]["subject"])
        assert subject["commonName"] == "kube-apiserver-client"
        assert peers[1] == {}
    finally:
        await configs.aclose()


async def test_insecure_server_is_plain_http() -> None:
    reg = kopf.Registry()
    kopf.on.validate("kex", registry=reg, id="plain")(lambda **_: None)
    configs = kopf.WebhookServer(addr="127.0.0.1", insecure=True)(
        admission_fn(admission_handlers(reg), memo={})
    )
    config = await anext(configs)
    try:
        assert "caBundle" not in config
        url = config["url"] or ""
        assert url.startswith("http://127.0.0.1:")

        def post() -> int:
            conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=5)
            try:
                conn.request("POST", "/plain", orjson.dumps(review()), {"Content-Type": "application/json"})
                return conn.getresponse().status
            finally:
                conn.close()

        assert await asyncio.to_thread(post) == 200
    finally:
        await configs.aclose()
