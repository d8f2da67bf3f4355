"""Clusters from kubeconfig Secrets in a hub (Cluster API's convention), on FakeClusters: a
Secret engages its cluster, a rotated kubeconfig engages it again, a deleted Secret disengages
it; and a kubeconfig from a Secret is untrusted input (no files, no credential plugins, bounded,
strictly parsed), refused with an error naming the Secret and the field."""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

import pytest
import yaml

from kubeop.client import ConfigError
from kubeop.fleet import kubeconfig_from_secret
from kubeop.fleet.secrets import SECRETS, cluster_name_of

from ._support import BOUND, Engaged, hub_secrets


def kubeconfig(server: str = "https://east.example:6443", *, user: dict[str, Any] | None = None) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": user if user is not None else {"token": "s3cret-token"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )


def secret(name: str, text: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": "fleet",
            "labels": labels if labels is not None else {"cluster.x-k8s.io/cluster-name": name.split("-")[0]},
        },
        "data": {"value": base64.b64encode(text.encode()).decode()},
    }


def test_an_inline_kubeconfig_is_read_with_its_token_kept_out_of_the_repr() -> None:
    config = kubeconfig_from_secret(secret("east-kubeconfig", kubeconfig()))
    assert config.server == "https://east.example:6443"
    assert config.token == "s3cret-token"
    assert "s3cret-token" not in repr(config)


@pytest.mark.parametrize(
    ("user", "field"),
    [
        ({"exec": {"command": "/bin/sh", "args": ["-c", "id"], "apiVersion": "v1"}}, "user.exec"),
        ({"auth-provider": {"name": "oidc"}}, "user.auth-provider"),
        ({"client-certificate": "/etc/passwd", "client-key": "/etc/shadow"}, "user.client-certificate"),
        ({"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}, "user.tokenFile"),
    ],
)
def test_files_and_credential_plugins_are_refused_naming_the_secret_and_field(
    user: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError, match=f"Secret fleet/east-kubeconfig.*sets {field}"):
        kubeconfig_from_secret(secret("east-kubeconfig", kubeconfig(user=user)))


def test_a_ca_file_is_refused() -> None:
    text = kubeconfig().replace(
        "server: https://east.example:6443",
        "certificate-authority: ../../etc/ca.crt\n    server: https://e:1",
    )
    with pytest.raises(ConfigError, match=r"cluster\.certificate-authority"):
        kubeconfig_from_secret(secret("east-kubeconfig", text))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "no data\\['value'\\]"),
        ({"value": 7}, "must be a base64 string"),
        ({"value": "not base64!"}, "not valid base64"),
        ({"value": base64.b64encode(b"{ [").decode()}, "not a YAML kubeconfig"),
        ({"value": base64.b64encode(b"- a list").decode()}, "kubeconfig mapping"),
        ({"value": "A" * (2 << 20)}, "larger than"),
    ],
)
def test_malformed_secrets_get_a_clear_error(data: dict[str, Any], message: str) -> None:
    s = secret("east-kubeconfig", "")
    s["data"] = data
    with pytest.raises(ConfigError, match=message):
        kubeconfig_from_secret(s)


def test_the_cluster_is_named_by_its_label_or_the_secret_name() -> None:
    assert cluster_name_of(secret("east-kubeconfig", "", labels={})) == "east"
    assert cluster_name_of(secret("x", "", labels={"cluster.x-k8s.io/cluster-name": "prod-1"})) == "prod-1"
    with pytest.raises(ValueError, match="DNS-1123"):
        cluster_name_of(secret("x", "", labels={"cluster.x-k8s.io/cluster-name": "../etc"}))


async def test_secrets_engage_rotate_and_disengage_their_clusters() -> None:
    fleet = Engaged(servers=True)
    async with hub_secrets(fleet) as api:
        await api.create(secret("east-kubeconfig", kubeconfig("https://east:6443")))
        await fleet.wait_for(1)
        assert fleet.log == [("engage", "east", "https://east:6443")]
        # A label change is not a new kubeconfig: nothing happens.
        await api.patch(SECRETS, "east-kubeconfig", {"metadata": {"labels": {"x": "y"}}}, namespace="fleet")
        # A rotated kubeconfig engages the cluster again.
        rotated = secret("east-kubeconfig", kubeconfig("https://east-2:6443"))
        await api.patch(SECRETS, "east-kubeconfig", {"data": rotated["data"]}, namespace="fleet")
        await fleet.wait_for(2)
        assert fleet.log[1] == ("engage", "east", "https://east-2:6443")
        # A second Secret naming the same cluster is refused; a bad one too; neither stops the rest.
        await api.create(
            secret("east-copy-kubeconfig", kubeconfig(), labels={"cluster.x-k8s.io/cluster-name": "east"})
        )
        await api.create(secret("evil-kubeconfig", kubeconfig(user={"exec": {"command": "sh"}})))
        await api.create(secret("west-kubeconfig", kubeconfig("https://west:6443")))
        await fleet.wait_for(3)
        assert fleet.log[2] == ("engage", "west", "https://west:6443")
        await api.delete(SECRETS, "east-kubeconfig", namespace="fleet")
        await fleet.wait_for(4)
        assert fleet.log[3] == ("disengage", "east", "")
        assert len(fleet.log) == 4


async def test_a_refused_rotation_keeps_the_last_accepted_kubeconfig_engaged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fleet = Engaged(servers=True)
    async with hub_secrets(fleet) as api:
        await api.create(secret("east-kubeconfig", kubeconfig("https://east:6443")))
        await fleet.wait_for(1)
        bad = secret("east-kubeconfig", kubeconfig(user={"exec": {"command": "sh"}}))
        refused = asyncio.Event()

        class Refusals(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "user.exec" in record.getMessage():
                    refused.set()

        handler = Refusals(logging.WARNING)
        logging.getLogger().addHandler(handler)
        try:
            with caplog.at_level("WARNING"):
                await api.patch(SECRETS, "east-kubeconfig", {"data": bad["data"]}, namespace="fleet")
                await asyncio.wait_for(refused.wait(), BOUND)
        finally:
            logging.getLogger().removeHandler(handler)
        # then a good rotation is taken: the refused one changed nothing in between
        good = secret("east-kubeconfig", kubeconfig("https://east-3:6443"))
        await api.patch(SECRETS, "east-kubeconfig", {"data": good["data"]}, namespace="fleet")
        await fleet.wait_for(2)
        assert fleet.log == [
            ("engage", "east", "https://east:6443"),
            ("engage", "east", "https://east-3:6443"),
        ]
        assert "s3cret-token" not in caplog.text
