"""A kubeconfig Secret planted by someone who can write Secrets in the hub: every way round the
"inline credentials only" rule is refused with a ConfigError naming the Secret (never another
exception, never a hang), the provider survives what it refuses, and no credential reaches a
log line or a repr."""

from __future__ import annotations

import asyncio
import base64
import copy
import logging
import time
from typing import Any

import pytest
import yaml

from kubeop.client import ClientConfig, ConfigError
from kubeop.fleet import ClusterSharding, Fleet, Kubeconfigs, KubeconfigSecrets, kubeconfig_from_secret
from kubeop.fleet._names import check_cluster_name
from kubeop.fleet.secrets import SECRETS
from kubeop.testing import FakeCluster

from ._support import Engaged, hub_secrets, in_background

TOKEN = "s3cret-token-0f1e2d"
CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()


def config_dict(cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": "https://east.example:6443", "certificate-authority-data": CA}
                | (cluster or {}),
            }
        ],
        "users": [{"name": "u", "user": {"token": TOKEN} | (user or {})}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "n"}}],
        "current-context": "x",
    }


def secret_of(raw: bytes, name: str = "east-kubeconfig", *, cluster: str | None = None) -> dict[str, Any]:
    labels = {"cluster.x-k8s.io/cluster-name": cluster or name.removesuffix("-kubeconfig")}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "fleet", "labels": labels},
        "data": {"value": base64.b64encode(raw).decode()},
    }


def secret(config: dict[str, Any], name: str = "east-kubeconfig") -> dict[str, Any]:
    return secret_of(yaml.safe_dump(config).encode(), name)


def test_a_clean_inline_kubeconfig_is_accepted() -> None:
    config = kubeconfig_from_secret(secret(config_dict()))
    assert config.server == "https://east.example:6443"
    assert config.token == TOKEN


@pytest.mark.parametrize(
    ("cluster", "field"),
    [
        ({"proxy-url": "http://evil.example:3128"}, "cluster.proxy-url"),
        ({"proxy-url": "socks5://evil.example:1080"}, "cluster.proxy-url"),
        (
            {"insecure-skip-tls-verify": True, "certificate-authority-data": None},
            "cluster.insecure-skip-tls-verify",
        ),
        ({"certificate-authority": "file:///etc/ssl/private/key.pem"}, "cluster.certificate-authority"),
        ({"certificate-authority": "../../../../proc/self/environ"}, "cluster.certificate-authority"),
    ],
)
def test_a_proxy_an_unverified_server_or_a_file_is_refused_naming_the_field(
    cluster: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError, match=f"Secret fleet/east-kubeconfig.*sets {field}"):
        kubeconfig_from_secret(secret(config_dict(cluster=cluster)))


@pytest.mark.parametrize(
    "user",
    [
        {"client-certificate": "/proc/self/root/etc/passwd", "client-key": "../key", "token": None},
        {"tokenFile": "file:///var/run/secrets/kubernetes.io/serviceaccount/token"},
        {"exec": {"command": "./../../bin/sh", "apiVersion": "client.authentication.k8s.io/v1"}},
        {"auth-provider": {"name": "gcp", "config": {"cmd-path": "/bin/sh"}}},
    ],
)
def test_files_paths_and_plugins_in_every_spelling_are_refused(user: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"Secret fleet/east-kubeconfig.*may not"):
        kubeconfig_from_secret(secret(config_dict(user=user)))


@pytest.mark.parametrize("server", ["http://east.example:6443", "http://10.0.0.1"])
def test_a_server_without_tls_is_refused(server: str) -> None:
    with pytest.raises(ConfigError, match=r"Secret fleet/east-kubeconfig.*must be an https:// URL"):
        kubeconfig_from_secret(secret(config_dict(cluster={"server": server})))


@pytest.mark.parametrize(
    "server",
    [
        "file:///etc/passwd",
        "unix:///var/run/docker.sock",
        f"https://admin:{TOKEN}@east.example",
        f"https://east.example:6443/?access_token={TOKEN}",
        f"https://east.example:6443/#{TOKEN}",
    ],
)
def test_a_server_that_is_not_a_url_or_carries_credentials_is_refused_without_them(server: str) -> None:
    with pytest.raises(ConfigError) as caught:
        kubeconfig_from_secret(secret(config_dict(cluster={"server": server})))
    assert TOKEN not in str(caught.value)


def test_a_duplicate_key_hiding_an_exec_plugin_is_refused() -> None:
    # safe_load keeps the last "users"; another parser may keep the first: refuse both readings.
    text = yaml.safe_dump(config_dict()) + "users: [{name: u, user: {token: other}}]\n"
    with pytest.raises(ConfigError, match="duplicate"):
        kubeconfig_from_secret(secret_of(text.encode()))
    nested = yaml.safe_dump(config_dict()).replace(f"token: {TOKEN}", f"token: {TOKEN}\n    token: x")
    with pytest.raises(ConfigError, match="duplicate"):
        kubeconfig_from_secret(secret_of(nested.encode()))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # The billion laughs: aliases are refused before anything is built.
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(9)
            ),
            "YAML alias",
        ),
        ("clusters: &c []\nusers: *c\n", "YAML alias"),
        ("a: " + "[" * 5000 + "]" * 5000, "(nested deeper|not a YAML kubeconfig)"),
        ("a: " + "{b: " * 40 + "1" + "}" * 40, "nested deeper than"),
        (
            "clusters: [" + ", ".join(f"{{name: c{i}}}" for i in range(30_000)) + "]",
            "more than .* YAML nodes",
        ),
    ],
)
def test_yaml_bombs_are_refused_quickly(text: str, message: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match=f"Secret fleet/east-kubeconfig: data\\['value'\\].*{message}"):
        kubeconfig_from_secret(secret_of(text.encode()))
    assert time.monotonic() - t0 < 2.0  # on the provider's event loop: never seconds of parsing


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("current-context: caf\xe9\n".encode("latin-1"), "not UTF-8"),
        ("current-context: x\n".encode("utf-16"), "not UTF-8"),
        (b"\x00\x01\x02", "not a YAML kubeconfig"),
        (b"!!python/object/apply:os.system [id]", "not a YAML kubeconfig"),
        (b"", "kubeconfig mapping"),
    ],
)
def test_bytes_that_are_not_a_utf8_yaml_mapping_are_refused(raw: bytes, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        kubeconfig_from_secret(secret_of(raw))


_FIELDS = [
    ("clusters",),
    ("users",),
    ("contexts",),
    ("current-context",),
    ("clusters", 0),
    ("clusters", 0, "name"),
    ("clusters", 0, "cluster"),
    ("users", 0, "user"),
    ("contexts", 0, "context"),
    *(
        ("clusters", 0, "cluster", f)
        for f in (
            "server",
            "certificate-authority-data",
            "tls-server-name",
            "disable-compression",
            "extensions",
        )
    ),
    *(
        ("users", 0, "user", f)
        for f in ("token", "username", "password", "client-certificate-data", "client-key-data", "as")
    ),
    *(("contexts", 0, "context", f) for f in ("cluster", "user", "namespace")),
]


@pytest.mark.parametrize("path", _FIELDS, ids=lambda p: ".".join(map(str, p)))
def test_a_wrong_type_in_any_field_is_a_config_error_never_another_exception(path: tuple[Any, ...]) -> None:
    for value in (7, 1.5, True, [], ["a"], {"a": 1}, "x", None):
        config = config_dict()
        target: Any = config
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = copy.deepcopy(value)
        try:
            kubeconfig_from_secret(secret(config))
        except ConfigError as exc:
            assert TOKEN not in str(exc)


def test_metadata_of_the_wrong_shape_is_a_config_error() -> None:
    for bad in ({"metadata": ["x"], "data": {"value": "eA=="}}, {"metadata": None, "data": ["x"]}):
        with pytest.raises(ConfigError):
            kubeconfig_from_secret(bad)


@pytest.mark.parametrize(
    "name", ["east\n", "east\r", "east\r\nX-Injected: 1", "East", "a..b", "-east", "a/b", "x" * 254, ""]
)
def test_a_cluster_name_that_is_not_dns_safe_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="DNS-1123"):
        check_cluster_name(name, where="test")


# -- the provider ----------------------------------------------------------------------------------


async def test_the_provider_survives_every_refused_secret_and_logs_no_credential(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fleet = Engaged()
    caplog.set_level(logging.DEBUG)
    async with hub_secrets(fleet) as api:
        hostile = [
            ("a: " + "[" * 5000 + "]" * 5000).encode(),  # RecursionError: used to end the provider
            yaml.safe_dump(config_dict(cluster={"proxy-url": f"http://u:{TOKEN}@proxy:3128"})).encode(),
            yaml.safe_dump(config_dict(cluster={"server": f"https://u:{TOKEN}@east"})).encode(),
            yaml.safe_dump(config_dict(user={"exec": {"command": "sh", "args": [TOKEN]}})).encode(),
            b"\xff\xfe" + TOKEN.encode(),
        ]
        for i, raw in enumerate(hostile):
            await api.create(secret_of(raw, f"bad{i}-kubeconfig"))
        await api.create(secret(config_dict(), "west-kubeconfig"))
        await fleet.wait_for(1)
        assert fleet.log == [("engage", "west")]
    refused = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == len(hostile)
    for record in caplog.records:
        text = f"{record.getMessage()} {record.__dict__} {record.exc_text or ''}"
        assert TOKEN not in text, record.getMessage()


def test_no_fleet_object_shows_a_credential_in_its_repr() -> None:
    config = kubeconfig_from_secret(secret(config_dict()))
    sharding = ClusterSharding(namespace="fleet", hub=config)
    objects: list[object] = [
        config,
        Kubeconfigs({"east": config}),
        KubeconfigSecrets("fleet", hub=config),
        sharding,
        Fleet(Kubeconfigs({"east": config}), sharding=sharding),
    ]
    for obj in objects:
        assert TOKEN not in repr(obj), type(obj).__name__
        assert TOKEN not in str(obj), type(obj).__name__


def server_secret(name: str, server: str, cluster: str) -> dict[str, Any]:
    s = secret(config_dict(cluster={"server": server}), name)
    s["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": cluster}
    return s


class Servers(Engaged):
    async def engage(self, name: str, config: ClientConfig, **_: Any) -> None:
        self.log.append(("engage", f"{name}={config.server}"))
        self.changed.set()


async def test_a_planted_secret_naming_a_cluster_never_takes_it_over_whatever_the_order() -> None:
    hub = FakeCluster()
    api = hub.client(namespace="fleet")
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet"}})
    # Listed first at a restart (by name): a Secret that names "prod" without being prod's own.
    await api.create(server_secret("aaa-kubeconfig", "https://evil.example", "prod"))
    await api.create(server_secret("prod-kubeconfig", "https://prod.example", "prod"))
    fleet = Servers()
    async with api, in_background(lambda stop: KubeconfigSecrets("fleet", hub=api).run(fleet, stop)):
        await fleet.wait_for(1)
        await asyncio.sleep(0.2)
        assert fleet.log == [("engage", "prod=https://prod.example")]
        # Engaged from another Secret while it had none, the cluster's own Secret replaces it.
        await api.create(server_secret("other-kubeconfig", "https://other-1.example", "other"))
        await api.create(server_secret("zzz-kubeconfig", "https://zzz.example", "stage"))
        await fleet.wait_for(3)
        await api.create(server_secret("stage-kubeconfig", "https://stage.example", "stage"))
        await fleet.wait_for(4)
        assert fleet.log[-1] == ("engage", "stage=https://stage.example")
        await api.delete(SECRETS, "zzz-kubeconfig", namespace="fleet")  # no longer the holder
        await asyncio.sleep(0.2)
        assert len(fleet.log) == 4


@pytest.mark.parametrize(
    ("cluster", "user"),
    [
        ({}, {"token": "abc\r\nX-Injected: 1"}),
        ({}, {"username": "admin\r\n", "password": "p"}),
        ({}, {"token": "t\x00"}),
        ({"server": "https://east.example:6443/\r\nX-Injected: 1"}, {}),
        ({"tls-server-name": "east\nexample"}, {}),
    ],
)
def test_control_characters_in_any_field_are_refused_without_showing_the_value(
    cluster: dict[str, Any], user: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError, match="control character") as caught:
        kubeconfig_from_secret(secret(config_dict(cluster=cluster, user=user)))
    assert "X-Injected" not in str(caught.value)
    config = config_dict()
    config["contexts"][0]["name"] = "x\r\ny"
    config["current-context"] = "x\r\ny"
    with pytest.raises(ConfigError, match="control character"):
        kubeconfig_from_secret(secret(config))
