"""Kubeconfig fields are read with their types, as kubectl reads them (hardening issue #12).

A quoted boolean (``insecure-skip-tls-verify: "false"``) used to be taken by truthiness and
turned TLS verification off; a string where a mapping or list belongs crashed with an
AttributeError or became a tuple of characters. Every such field is now a ConfigError naming the
file, the entry and the field. ClientConfig validates its own TLS flags and extra headers.
"""

from __future__ import annotations

import copy
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.client.config import ClientConfig, ConfigError, ExecConfig
from kubeop.client.incluster import in_cluster_config
from kubeop.client.kubeconfig import KubeConfig, load_kubeconfig
from kubeop.client.tls import ssl_context

from .certs import self_signed

CA_B64 = "Q0E="  # base64 of b"CA"


def base() -> dict[str, Any]:
    """A valid kubeconfig: cluster 'c', user 'u' with an exec plugin, context 'ctx'."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "ctx",
        "clusters": [{"name": "c", "cluster": {"server": "https://h:6443"}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": "plugin",
                        "args": ["get-token"],
                        "env": [{"name": "A", "value": "1"}],
                    }
                },
            }
        ],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
    }


def write(tmp_path: Path, doc: dict[str, Any]) -> str:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def with_field(section: str, key: str, value: Any) -> dict[str, Any]:
    """``base()`` with ``key`` set to ``value`` in the cluster, user, context or exec spec."""
    doc = copy.deepcopy(base())
    target = {
        "cluster": doc["clusters"][0]["cluster"],
        "user": doc["users"][0]["user"],
        "context": doc["contexts"][0]["context"],
        "exec": doc["users"][0]["user"]["exec"],
        "top": doc,
    }[section]
    target[key] = value
    return doc


# -- booleans -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "key", "entry"),
    [
        ("cluster", "insecure-skip-tls-verify", "cluster 'c'"),
        ("cluster", "disable-compression", "cluster 'c'"),
        ("exec", "provideClusterInfo", "user 'u'"),
    ],
)
@pytest.mark.parametrize("text", ["false", "true", "no", ""])
def test_quoted_booleans_are_refused(tmp_path: Path, section: str, key: str, entry: str, text: str) -> None:
    path = write(tmp_path, with_field(section, key, text))
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(path)
    message = str(info.value)
    assert path in message and entry in message and key in message
    assert "must be a boolean, not a string" in message and "without quotes" in message


def test_insecure_false_keeps_verification_on(tmp_path: Path) -> None:
    doc = with_field("cluster", "insecure-skip-tls-verify", False)
    doc["clusters"][0]["cluster"]["disable-compression"] = False
    cfg = load_kubeconfig(write(tmp_path, doc))
    assert cfg.insecure_skip_tls_verify is False and cfg.compression is True
    assert ssl_context(cfg).verify_mode == ssl.CERT_REQUIRED
    # null is "not set", as in kubectl
    cfg = load_kubeconfig(write(tmp_path, with_field("cluster", "insecure-skip-tls-verify", None)))
    assert cfg.insecure_skip_tls_verify is False


def test_yaml_booleans_are_booleans(tmp_path: Path) -> None:
    path = tmp_path / "config"
    text = yaml.safe_dump(base()).replace(
        "server: https://h:6443", "server: https://h:6443\n    insecure-skip-tls-verify: true"
    )
    path.write_text(text)
    assert load_kubeconfig(str(path)).insecure_skip_tls_verify is True


@pytest.mark.parametrize("ca", [{"certificate-authority-data": CA_B64}, {"certificate-authority": "ca.crt"}])
def test_insecure_with_a_ca_is_refused(tmp_path: Path, ca: dict[str, str]) -> None:
    doc = with_field("cluster", "insecure-skip-tls-verify", True)
    doc["clusters"][0]["cluster"].update(ca)
    path = write(tmp_path, doc)
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(path)
    message = str(info.value)
    assert path in message and "cluster 'c'" in message
    assert "specifying a root certificates file with the insecure flag is not allowed" in message


def test_insecure_override_drops_the_files_ca(tmp_path: Path) -> None:
    """As kubectl --insecure-skip-tls-verify: the flag wins over the kubeconfig's CA."""
    doc = with_field("cluster", "certificate-authority-data", CA_B64)
    cfg = load_kubeconfig(write(tmp_path, doc), insecure_skip_tls_verify=True)
    assert cfg.insecure_skip_tls_verify and cfg.ca_data is None and cfg.ca_file is None
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("t")
    (sa / "ca.crt").write_text("CA")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = in_cluster_config(env=env, sa_dir=str(sa), insecure_skip_tls_verify=True)
    assert cfg.insecure_skip_tls_verify and cfg.ca_file is None


def test_client_config_refuses_insecure_with_a_ca() -> None:
    ca, _ = self_signed("ca", ca=True)
    for ca_option in ({"ca_data": ca}, {"ca_file": "/etc/ca.crt"}):
        with pytest.raises(ConfigError, match="root certificates file with the insecure flag"):
            ClientConfig(server="https://h", insecure_skip_tls_verify=True, **ca_option)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="root certificates file with the insecure flag"):
        ClientConfig(server="https://h", ca_data=ca).with_options(insecure_skip_tls_verify=True)
    ClientConfig(server="https://h", insecure_skip_tls_verify=True)
    ClientConfig(server="https://h", ca_data=ca)


@pytest.mark.parametrize("name", ["insecure_skip_tls_verify", "compression"])
def test_client_config_booleans_must_be_bools(name: str) -> None:
    with pytest.raises(ConfigError, match=f"{name} must be a bool, not str"):
        ClientConfig(server="https://h", **{name: "false"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="provide_cluster_info must be a bool"):
        ExecConfig(command="p", provide_cluster_info="false")  # type: ignore[arg-type]


# -- wrong types, table-driven ----------------------------------------------------------------------

WRONG_TYPES = [
    # (section, field, wrong value, what the message must say)
    ("cluster", "server", 6443, "'server' must be a string, not a number"),
    ("cluster", "server", ["https://h"], "'server' must be a string, not a list"),
    ("cluster", "certificate-authority", {"path": "x"}, "'certificate-authority' must be a string"),
    ("cluster", "certificate-authority-data", ["Q0E="], "'certificate-authority-data' must be a string"),
    ("cluster", "tls-server-name", 1, "'tls-server-name' must be a string, not a number"),
    ("cluster", "proxy-url", {"url": "http://p"}, "'proxy-url' must be a string, not a mapping"),
    ("cluster", "insecure-skip-tls-verify", 1, "'insecure-skip-tls-verify' must be a boolean, not a number"),
    ("cluster", "disable-compression", ["yes"], "'disable-compression' must be a boolean, not a list"),
    ("cluster", "extensions", "x", "'extensions' must be a list, not a string"),
    ("user", "token", 12345, "'token' must be a string, not a number (quote it)"),
    ("user", "token", ["abc"], "'token' must be a string, not a list"),
    ("user", "tokenFile", True, "'tokenFile' must be a string, not a boolean"),
    ("user", "username", ["a"], "'username' must be a string"),
    ("user", "password", 1234, "'password' must be a string, not a number"),
    ("user", "client-certificate", ["c"], "'client-certificate' must be a string"),
    ("user", "client-certificate-data", 1, "'client-certificate-data' must be a string"),
    ("user", "client-key", {"k": 1}, "'client-key' must be a string"),
    ("user", "client-key-data", ["k"], "'client-key-data' must be a string"),
    ("user", "exec", "plugin get-token", "'exec' must be a mapping, not a string"),
    ("user", "exec", ["plugin"], "'exec' must be a mapping, not a list"),
    ("user", "auth-provider", "gcp", "'auth-provider' must be a mapping, not a string"),
    ("user", "auth-provider", {"name": ["gcp"]}, "'auth-provider.name' must be a string"),
    ("exec", "command", ["plugin", "x"], "'exec.command' must be a string, not a list"),
    ("exec", "args", "--flag", "'exec.args' must be a list, not a string"),
    ("exec", "args", [1, 2], "'exec.args[0]' must be a string, not a number"),
    ("exec", "env", {"A": "1"}, "'exec.env' must be a list, not a mapping"),
    ("exec", "env", [{"name": "A", "value": 1}], "'exec.env[0].value' must be a string, not a number"),
    ("exec", "env", [{"name": 1, "value": "v"}], "'exec.env[0].name' must be a string, not a number"),
    ("exec", "apiVersion", 1, "'exec.apiVersion' must be a string"),
    ("exec", "provideClusterInfo", 1, "'exec.provideClusterInfo' must be a boolean, not a number"),
    ("exec", "installHint", ["x"], "'exec.installHint' must be a string"),
    ("exec", "interactiveMode", True, "'exec.interactiveMode' must be a string"),
    ("exec", "interactiveMode", "Sometimes", "'exec.interactiveMode' must be Never, IfAvailable or Always"),
    ("context", "cluster", ["c"], "'cluster' must be a string, not a list"),
    ("context", "user", {"name": "u"}, "'user' must be a string, not a mapping"),
    ("context", "namespace", 7, "'namespace' must be a string, not a number"),
]


@pytest.mark.parametrize(("section", "key", "value", "expected"), WRONG_TYPES)
def test_wrong_types_name_file_entry_and_field(
    tmp_path: Path, section: str, key: str, value: Any, expected: str
) -> None:
    path = write(tmp_path, with_field(section, key, value))
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(path)
    message = str(info.value)
    entry = {"cluster": "cluster 'c'", "context": "context 'ctx'"}.get(section, "user 'u'")
    assert path in message and entry in message and expected in message, message


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"current-context": ["ctx"]}, "'current-context' must be a string, not a list"),
        (
            {"clusters": [{"name": 5, "cluster": {"server": "https://h"}}]},
            "clusters[0].name must be a string",
        ),
        (
            {"users": [{"name": "u", "user": "token"}]},
            "users[0] ('u'): 'user' must be a mapping, not a string",
        ),
        ({"contexts": {"ctx": {}}}, "'contexts' must be a list, not a mapping"),
    ],
)
def test_wrong_types_at_the_top(tmp_path: Path, doc: dict[str, Any], expected: str) -> None:
    full = {**base(), **doc}
    path = write(tmp_path, full)
    with pytest.raises(ConfigError) as info:
        load_kubeconfig(path)
    assert path in str(info.value) and expected in str(info.value)
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        KubeConfig.from_dict(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_valid_types_still_load(tmp_path: Path) -> None:
    cfg = load_kubeconfig(write(tmp_path, base()))
    assert cfg.exec is not None and cfg.exec.args == ("get-token",) and dict(cfg.exec.env) == {"A": "1"}
    assert cfg.namespace == "ns" and cfg.exec.interactive_mode == "IfAvailable"


# -- extra headers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        [("Impersonate-User", "jane"), ("Impersonate-Group", "devs"), ("Impersonate-Extra-scopes", "a b")],
        [("Authorization", "Bearer abc"), ("X-Custom_Header.1", "v: with colon and spaces")],
        {"Accept-Language": "en"},
        (),
    ],
)
def test_valid_extra_headers(headers: Any) -> None:
    cfg = ClientConfig(server="https://h", extra_headers=headers)
    assert isinstance(cfg.extra_headers, tuple)
    assert list(cfg.extra_headers) == list(headers.items() if isinstance(headers, dict) else headers)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([("X Bad", "v")], "extra header 'X': the name contains ' '"),
        ([("X-Injected:", "v")], "extra header 'X-Injected': the name contains ':'"),
        ([("X-A\r\nHost", "v")], "extra header 'X-A': the name contains '\\r'"),
        ([("X-Nul\0", "v")], "extra header 'X-Nul': the name contains '\\x00'"),
        ([("", "v")], "extra_headers[0]: the name is empty"),
        ([(" Lead", "v")], "extra_headers[0]: the name contains ' '"),
        (
            [("X-Ok", "v"), ("X-Split", "a\r\nInjected: yes")],
            "extra header 'X-Split': the value contains CR, LF or NUL",
        ),
        ([("X-Lf", "a\nb")], "extra header 'X-Lf': the value contains CR, LF or NUL"),
        ([("X-Nul", "a\0")], "extra header 'X-Nul': the value contains CR, LF or NUL"),
        ([("X-Int", 5)], "extra header 'X-Int': the value must be a string"),
        ([("Host", "evil")], "extra header 'Host' cannot be set"),
        ([("content-length", "0")], "extra header 'content-length' cannot be set"),
        ([("Transfer-Encoding", "chunked")], "extra header 'Transfer-Encoding' cannot be set"),
        ([("Connection", "close")], "extra header 'Connection' cannot be set"),
        ([("X-Only-Name",)], "extra_headers[0] is not a (name, value) pair"),
        ("X-Header: v", "extra_headers must be a mapping or a sequence"),
    ],
)
def test_invalid_extra_headers_are_refused(headers: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        ClientConfig(server="https://h", extra_headers=headers, source="kubeconfig K")
    assert str(info.value).startswith("kubeconfig K: ") and expected in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("as", "jane"),
        ("as-uid", "1234"),
        ("as-groups", ["devs"]),
        ("as-user-extra", {"scopes": ["view"]}),
    ],
)
def test_impersonation_is_refused_not_dropped(tmp_path: Path, key: str, value: Any) -> None:
    """Dropping ``as: jane`` silently would act with the kubeconfig user's own rights."""
    with pytest.raises(ConfigError, match=f"impersonation \\('{key}'\\) is not supported"):
        load_kubeconfig(write(tmp_path, with_field("user", key, value)))
