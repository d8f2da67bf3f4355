"""Kubeconfig files: loading, merging several files, and resolving a context to a ClientConfig.

Merging follows kubectl: files are taken in ``$KUBECONFIG`` order (missing ones skipped, an
explicitly named file must exist); for clusters, users and contexts the *first* file that defines
a name wins, and so does the first file that sets ``current-context``. Relative paths (CA,
client certificate and key, token file, exec command with a path separator) are resolved
against the directory of the file that defines them, not the working directory.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubeop.client.config import ClientConfig, ConfigError, ExecConfig

__all__ = ["KubeConfig", "default_kubeconfig_paths", "load_kubeconfig"]


def default_kubeconfig_paths(env: Mapping[str, str] | None = None) -> list[str]:
    """``$KUBECONFIG`` split on the path separator (deduplicated), else ``~/.kube/config``."""
    env = os.environ if env is None else env
    value = env.get("KUBECONFIG", "")
    if value:
        seen: list[str] = []
        for part in value.split(os.pathsep):
            if part and part not in seen:
                seen.append(os.path.expanduser(part))
        return seen
    return [os.path.expanduser("~/.kube/config")]


@dataclass
class _Entry:
    """A named cluster/user/context and the file it came from (for paths and messages)."""

    name: str
    body: Mapping[str, Any]
    file: str


@dataclass
class KubeConfig:
    """Several kubeconfig files merged with kubectl's first-wins rules."""

    files: list[str] = field(default_factory=list)
    clusters: dict[str, _Entry] = field(default_factory=dict)
    users: dict[str, _Entry] = field(default_factory=dict)
    contexts: dict[str, _Entry] = field(default_factory=dict)
    current_context: str | None = None

    @classmethod
    def load(cls, paths: str | Sequence[str], *, must_exist: bool = True) -> KubeConfig:
        """Load and merge ``paths``; with ``must_exist=False`` missing files are skipped."""
        if isinstance(paths, str):
            paths = [paths]
        merged = cls()
        for path in paths:
            path = os.path.expanduser(path)
            if not os.path.exists(path):
                if must_exist:
                    raise ConfigError(f"kubeconfig {path}: file does not exist")
                continue
            merged._merge(path, _read(path))
        if not merged.files:
            raise ConfigError(f"no kubeconfig file found (looked at {', '.join(paths) or 'nothing'})")
        return merged

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "<memory>") -> KubeConfig:
        """A kubeconfig given as a dict; relative paths resolve against ``path``'s directory."""
        merged = cls()
        merged._merge(path, data)
        return merged

    def _merge(self, path: str, data: Mapping[str, Any]) -> None:
        self.files.append(path)
        for section, target, inner in (
            ("clusters", self.clusters, "cluster"),
            ("users", self.users, "user"),
            ("contexts", self.contexts, "context"),
        ):
            items = data.get(section)
            if items is None:
                items = []
            if not isinstance(items, list):
                raise ConfigError(f"kubeconfig {path}: '{section}' must be a list")
            for i, item in enumerate(items):
                if not isinstance(item, Mapping) or not item.get("name"):
                    raise ConfigError(f"kubeconfig {path}: {section}[{i}] has no name")
                body = item.get(inner) or {}
                if not isinstance(body, Mapping):
                    raise ConfigError(f"kubeconfig {path}: {section}[{i}].{inner} must be a mapping")
                target.setdefault(str(item["name"]), _Entry(str(item["name"]), body, path))
        if self.current_context is None and data.get("current-context"):
            self.current_context = str(data["current-context"])

    def client_config(self, context: str | None = None, **overrides: Any) -> ClientConfig:
        """Resolve ``context`` (default: current-context) to a ClientConfig."""
        where = ", ".join(self.files)
        name = context or self.current_context
        if not name:
            raise ConfigError(
                f"kubeconfig {where}: no current-context set and no context given "
                f"(available: {', '.join(sorted(self.contexts)) or 'none'})"
            )
        ctx = self.contexts.get(name)
        if ctx is None:
            raise ConfigError(
                f"kubeconfig {where}: context {name!r} not found "
                f"(available: {', '.join(sorted(self.contexts)) or 'none'})"
            )
        cluster_name = ctx.body.get("cluster")
        cluster = self.clusters.get(str(cluster_name)) if cluster_name else None
        if cluster is None:
            raise ConfigError(
                f"kubeconfig {ctx.file}: context {name!r} refers to unknown cluster {cluster_name!r}"
            )
        user_name = ctx.body.get("user")
        user = self.users.get(str(user_name)) if user_name else None
        if user_name and user is None:
            raise ConfigError(f"kubeconfig {ctx.file}: context {name!r} refers to unknown user {user_name!r}")
        source = f"kubeconfig {ctx.file} (context {name!r})"
        settings: dict[str, Any] = {"source": source, "namespace": ctx.body.get("namespace") or "default"}
        settings.update(_cluster_settings(cluster))
        if user is not None:
            settings.update(_user_settings(user))
        settings.update(overrides)
        return ClientConfig(**settings)


def load_kubeconfig(
    paths: str | Sequence[str] | None = None, *, context: str | None = None, **overrides: Any
) -> ClientConfig:
    """Load kubeconfig file(s) and resolve a context.

    With ``paths=None`` the default locations are used (``$KUBECONFIG`` or ``~/.kube/config``),
    skipping missing files like kubectl does; explicitly named files must exist. ``overrides``
    replace ClientConfig fields (``qps=None``, ``namespace="x"``...).
    """
    if paths is None:
        config = KubeConfig.load(default_kubeconfig_paths(), must_exist=False)
    else:
        config = KubeConfig.load(paths)
    return config.client_config(context, **overrides)


def _read(path: str) -> Mapping[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"kubeconfig {path}:{where} malformed YAML: {getattr(e, 'problem', e)}") from None
    except OSError as e:
        raise ConfigError(f"kubeconfig {path}: cannot read: {e.strerror}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"kubeconfig {path}: top level must be a mapping, not {type(data).__name__}")
    return data


def _resolve(entry: _Entry, value: Any) -> str:
    path = os.path.expanduser(str(value))
    if not os.path.isabs(path):
        path = str(Path(entry.file).resolve().parent / path)
    return path


def _b64(entry: _Entry, key: str, value: Any) -> bytes:
    try:
        return base64.b64decode(str(value), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"kubeconfig {entry.file}: {entry.name}: '{key}' is not valid base64") from None


def _cluster_settings(entry: _Entry) -> dict[str, Any]:
    body = entry.body
    server = body.get("server")
    if not server:
        raise ConfigError(f"kubeconfig {entry.file}: cluster {entry.name!r} has no 'server'")
    out: dict[str, Any] = {"server": str(server).rstrip("/")}
    if body.get("certificate-authority-data"):
        out["ca_data"] = _b64(entry, "certificate-authority-data", body["certificate-authority-data"])
    elif body.get("certificate-authority"):
        out["ca_file"] = _resolve(entry, body["certificate-authority"])
    if body.get("insecure-skip-tls-verify"):
        out["insecure_skip_tls_verify"] = True
    if body.get("tls-server-name"):
        out["tls_server_name"] = str(body["tls-server-name"])
    if body.get("proxy-url"):
        out["proxy_url"] = str(body["proxy-url"])
    if body.get("disable-compression"):
        out["compression"] = False
    return out


def _user_settings(entry: _Entry) -> dict[str, Any]:
    body = entry.body
    out: dict[str, Any] = {}
    if body.get("client-certificate-data"):
        out["client_cert_data"] = _b64(entry, "client-certificate-data", body["client-certificate-data"])
    elif body.get("client-certificate"):
        out["client_cert_file"] = _resolve(entry, body["client-certificate"])
    if body.get("client-key-data"):
        out["client_key_data"] = _b64(entry, "client-key-data", body["client-key-data"])
    elif body.get("client-key"):
        out["client_key_file"] = _resolve(entry, body["client-key"])
    has_cert = "client_cert_data" in out or "client_cert_file" in out
    has_key = "client_key_data" in out or "client_key_file" in out
    if has_cert != has_key:
        missing = "client-key" if has_cert else "client-certificate"
        raise ConfigError(f"kubeconfig {entry.file}: user {entry.name!r} has no {missing}(-data)")
    if body.get("token"):
        out["token"] = str(body["token"])
    elif body.get("tokenFile"):
        out["token_file"] = _resolve(entry, body["tokenFile"])
    if body.get("username"):
        out["username"] = str(body["username"])
        out["password"] = str(body.get("password") or "")
    if body.get("exec"):
        out["exec"] = _exec_config(entry, body["exec"])
    if body.get("auth-provider"):
        provider = (body["auth-provider"] or {}).get("name", "?")
        raise ConfigError(
            f"kubeconfig {entry.file}: user {entry.name!r} uses auth-provider {provider!r}, which "
            "Kubernetes removed in 1.26; use an exec credential plugin instead"
        )
    return out


def _exec_config(entry: _Entry, spec: Any) -> ExecConfig:
    if not isinstance(spec, Mapping) or not spec.get("command"):
        raise ConfigError(f"kubeconfig {entry.file}: user {entry.name!r}: exec has no 'command'")
    api_version = str(spec.get("apiVersion") or "")
    if api_version not in ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"):
        raise ConfigError(
            f"kubeconfig {entry.file}: user {entry.name!r}: exec apiVersion {api_version!r} is not "
            "client.authentication.k8s.io/v1 or v1beta1"
        )
    command = str(spec["command"])
    if os.sep in command or (os.altsep and os.altsep in command):
        command = _resolve(entry, command)
    env: dict[str, str] = {}
    for i, item in enumerate(spec.get("env") or ()):
        if not isinstance(item, Mapping) or "name" not in item:
            raise ConfigError(f"kubeconfig {entry.file}: user {entry.name!r}: exec.env[{i}] has no name")
        env[str(item["name"])] = str(item.get("value") or "")
    return ExecConfig(
        command=command,
        args=tuple(str(a) for a in spec.get("args") or ()),
        env=env,
        api_version=api_version,
        provide_cluster_info=bool(spec.get("provideClusterInfo")),
        install_hint=str(spec.get("installHint") or ""),
        interactive_mode=str(spec.get("interactiveMode") or "IfAvailable"),
    )
