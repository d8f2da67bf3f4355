"""Kubeconfig loading: merging several files, contexts, paths, inline data and bad input."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.client.config import ClientConfig, ConfigError
from kubeop.client.incluster import in_cluster_config, is_in_cluster
from kubeop.client.kubeconfig import KubeConfig, default_kubeconfig_paths, load_kubeconfig


def write(path: Path, data: Any) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


def kubeconfig(
    *, clusters: dict[str, Any], users: dict[str, Any], contexts: dict[str, Any], current: str | None = None
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters.items()],
        "users": [{"name": n, "user": u} for n, u in users.items()],
        "contexts": [{"name": n, "context": c} for n, c in contexts.items()],
    }
    if current:
        doc["current-context"] = current
    return doc


def test_single_file_with_relative_paths(tmp_path: Path) -> None:
    path = write(
        tmp_path / "conf" / "config",
        kubeconfig(
            clusters={"c": {"server": "https://127.0.0.1:6443/", "certificate-authority": "pki/ca.crt"}},
            users={"u": {"client-certificate": "pki/u.crt", "client-key": "/abs/u.key"}},
            contexts={"ctx": {"cluster": "c", "user": "u", "namespace": "team"}},
            current="ctx",
        ),
    )
    cfg = load_kubeconfig(path)
    assert cfg.server == "https://127.0.0.1:6443"
    assert cfg.ca_file == str(tmp_path / "conf" / "pki" / "ca.crt")
    assert cfg.client_cert_file == str(tmp_path / "conf" / "pki" / "u.crt")
    assert cfg.client_key_file == "/abs/u.key"
    assert cfg.namespace == "team"
    assert "ctx" in cfg.source and path in cfg.source


def test_merge_first_file_wins(tmp_path: Path) -> None:
    a = write(
        tmp_path / "a" / "config",
        kubeconfig(
            clusters={"c": {"server": "https://a:1", "certificate-authority": "ca.crt"}},
            users={"u": {"token": "from-a"}},
            contexts={"ctx": {"cluster": "c", "user": "u"}},
            current="ctx",
        ),
    )
    b = write(
        tmp_path / "b" / "config",
        kubeconfig(
            clusters={
                "c": {"server": "https://b:1"},
                "only-b": {"server": "https://b:2", "certificate-authority": "x"},
            },
            users={"u": {"token": "from-b"}, "ub": {"tokenFile": "tok"}},
            contexts={"ctx": {"cluster": "c", "user": "u"}, "other": {"cluster": "only-b", "user": "ub"}},
            current="other",
        ),
    )
    env = {"KUBECONFIG": os.pathsep.join([a, str(tmp_path / "missing"), b, a])}
    paths = default_kubeconfig_paths(env)
    assert paths == [a, str(tmp_path / "missing"), b]
    merged = KubeConfig.load(paths, must_exist=False)
    assert merged.current_context == "ctx"  # first file that sets it
    cfg = merged.client_config()
    assert (cfg.server, cfg.token) == ("https://a:1", "from-a")
    assert cfg.ca_file == str(tmp_path / "a" / "ca.crt")
    other = merged.client_config("other")
    # Entries only in the second file resolve their paths against the second file's directory.
    assert other.server == "https://b:2"
    assert other.ca_file == str(tmp_path / "b" / "x")
    assert other.token_file == str(tmp_path / "b" / "tok")
    assert other.namespace == "default"


def test_inline_data_is_base64_decoded(tmp_path: Path) -> None:
    b64 = lambda s: base64.b64encode(s).decode()  # noqa: E731
    path = write(
        tmp_path / "config",
        kubeconfig(
            clusters={
                "c": {
                    "server": "https://h:1",
                    "certificate-authority-data": b64(b"CA"),
                    "tls-server-name": "kube",
                }
            },
            users={"u": {"client-certificate-data": b64(b"CERT"), "client-key-data": b64(b"KEY")}},
            contexts={"ctx": {"cluster": "c", "user": "u"}},
            current="ctx",
        ),
    )
    cfg = load_kubeconfig(path, qps=None)
    assert (cfg.ca_data, cfg.client_cert_data, cfg.client_key_data) == (b"CA", b"CERT", b"KEY")
    assert cfg.tls_server_name == "kube" and cfg.qps is None
    assert cfg.compression and cfg.proxy_url is None


def test_exec_and_insecure(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config",
        kubeconfig(
            clusters={"c": {"server": "https://h:1", "insecure-skip-tls-verify": True}},
            users={
                "u": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "./bin/plugin",
                        "args": ["get-token"],
                        "env": [{"name": "A", "value": "1"}],
                        "provideClusterInfo": True,
                    }
                }
            },
            contexts={"ctx": {"cluster": "c", "user": "u"}},
        ),
    )
    cfg = load_kubeconfig(path, context="ctx")
    assert cfg.insecure_skip_tls_verify
    assert cfg.exec is not None
    assert cfg.exec.command == str(tmp_path / "bin" / "plugin")
    assert cfg.exec.args == ("get-token",) and dict(cfg.exec.env) == {"A": "1"}
    assert cfg.exec.provide_cluster_info


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("clusters: [\n  - name: a\n   bad", "malformed YAML"),
        ("- 1\n- 2\n", "top level must be a mapping"),
        ("clusters: {}\n", "'clusters' must be a list"),
        ("clusters:\n- cluster: {server: x}\n", "clusters[0] has no name"),
    ],
)
def test_malformed_files_name_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = write(tmp_path / "config", content)
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(path)
    assert path in str(info.value) and message in str(info.value)


def test_missing_explicit_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_kubeconfig(str(tmp_path / "nope"))


def test_resolution_errors(tmp_path: Path) -> None:
    doc = kubeconfig(
        clusters={"c": {"server": "https://h:1"}, "noserver": {}},
        users={
            "u": {"token": "t"},
            "half": {"client-certificate": "c.crt"},
            "bad64": {"client-key-data": "@@@"},
        },
        contexts={
            "ok": {"cluster": "c", "user": "u"},
            "ghost-cluster": {"cluster": "nope", "user": "u"},
            "ghost-user": {"cluster": "c", "user": "nope"},
            "no-server": {"cluster": "noserver"},
            "half": {"cluster": "c", "user": "half"},
            "bad64": {"cluster": "c", "user": "bad64"},
        },
    )
    path = write(tmp_path / "config", doc)
    kc = KubeConfig.load(path)
    with pytest.raises(ConfigError, match="no current-context"):
        kc.client_config()
    with pytest.raises(ConfigError, match=r"context 'missing' not found \(available: bad64, ghost-cluster"):
        kc.client_config("missing")
    with pytest.raises(ConfigError, match="unknown cluster 'nope'"):
        kc.client_config("ghost-cluster")
    with pytest.raises(ConfigError, match="unknown user 'nope'"):
        kc.client_config("ghost-user")
    with pytest.raises(ConfigError, match="cluster 'noserver' has no 'server'"):
        kc.client_config("no-server")
    with pytest.raises(ConfigError, match="has no client-key"):
        kc.client_config("half")
    with pytest.raises(ConfigError, match="'client-key-data' is not valid base64"):
        kc.client_config("bad64")


def test_auth_provider_is_rejected_clearly(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config",
        kubeconfig(
            clusters={"c": {"server": "https://h:1"}},
            users={"u": {"auth-provider": {"name": "gcp"}}},
            contexts={"ctx": {"cluster": "c", "user": "u"}},
            current="ctx",
        ),
    )
    with pytest.raises(ConfigError, match=r"auth-provider 'gcp'.*exec credential plugin"):
        load_kubeconfig(path)


def test_client_config_validation() -> None:
    with pytest.raises(ConfigError, match="not an http"):
        ClientConfig(server="127.0.0.1:6443")
    with pytest.raises(ConfigError, match="qps"):
        ClientConfig(server="https://h", qps=0)
    assert ClientConfig(server="https://h").with_options(namespace="x").namespace == "x"


def test_in_cluster(tmp_path: Path) -> None:
    sa = tmp_path / "sa"
    write(sa / "token", "tok\n")
    write(sa / "namespace", "ops\n")
    write(sa / "ca.crt", "CA")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert is_in_cluster(env) and not is_in_cluster({})
    cfg = in_cluster_config(env=env, sa_dir=str(sa))
    assert cfg.server == "https://[fd00::1]:443"
    assert cfg.token_file == str(sa / "token") and cfg.token is None  # re-read as it rotates
    assert cfg.ca_file == str(sa / "ca.crt") and cfg.namespace == "ops"
    with pytest.raises(ConfigError, match="not running in a cluster"):
        in_cluster_config(env={}, sa_dir=str(sa))


def test_load_config_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubeop.client.config import load_config

    path = write(
        tmp_path / "config",
        kubeconfig(
            clusters={"c": {"server": "https://h:1"}},
            users={"u": {"token": "t"}},
            contexts={
                "ctx": {"cluster": "c", "user": "u"},
                "other": {"cluster": "c", "user": "u", "namespace": "o"},
            },
            current="ctx",
        ),
    )
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match="no Kubernetes configuration found"):
        load_config()
    assert load_config(kubeconfig=path).server == "https://h:1"
    monkeypatch.setenv("KUBECONFIG", path)
    assert load_config(context="other").namespace == "o"


def test_proxy_and_compression(tmp_path: Path) -> None:
    doc = kubeconfig(
        clusters={
            "c": {"server": "https://h:1", "proxy-url": "http://proxy:3128", "disable-compression": True},
            "socks": {"server": "https://h:1", "proxy-url": "socks5://proxy:1080"},
        },
        users={"u": {"token": "t"}},
        contexts={"ctx": {"cluster": "c", "user": "u"}, "socks": {"cluster": "socks", "user": "u"}},
    )
    kc = KubeConfig.from_dict(doc, path=str(tmp_path / "config"))
    cfg = kc.client_config("ctx")
    assert cfg.proxy_url == "http://proxy:3128" and not cfg.compression
    with pytest.raises(ConfigError, match=r"socks5://proxy:1080.*not supported"):
        kc.client_config("socks")
