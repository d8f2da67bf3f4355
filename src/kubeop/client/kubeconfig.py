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


@dataclass(repr=False)
class _Entry:
    """A named cluster/user/context and the file it came from (for paths and messages)."""

    name: str
    body: Mapping[str, Any]
    file: str
    kind: str = "entry"

    @property
    def where(self) -> str:
        return f"kubeconfig {self.file}: {self.kind} {self.name!r}"

    def __repr__(self) -> str:
        # The body holds tokens, passwords and keys: name the fields, never show their values.
        return (
            f"_Entry(kind={self.kind!r}, name={self.name!r}, file={self.file!r}, fields={sorted(self.body)})"
        )


@dataclass(repr=False)
class KubeConfig:
    """Several kubeconfig files merged with kubectl's first-wins rules.

    Every field is type-checked as it is used, as kubectl does: a string where a boolean belongs
    (``insecure-skip-tls-verify: "false"``), a string where a list or mapping belongs, or a number
    where a string belongs is a :class:`ConfigError` naming the file, the entry and the field.
    ``repr()`` lists files and names only: the entries hold credentials.
    """

    files: list[str] = field(default_factory=list)
    clusters: dict[str, _Entry] = field(default_factory=dict)
    users: dict[str, _Entry] = field(default_factory=dict)
    contexts: dict[str, _Entry] = field(default_factory=dict)
    current_context: str | None = None

    def __repr__(self) -> str:
        return (
            f"KubeConfig(files={self.files!r}, clusters={sorted(self.clusters)!r}, "
            f"users={sorted(self.users)!r}, contexts={sorted(self.contexts)!r}, "
            f"current_context={self.current_context!r})"
        )

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
        if not isinstance(data, Mapping):
            raise ConfigError(f"kubeconfig {path}: top level must be a mapping, not {_type(data)}")
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
                raise ConfigError(f"kubeconfig {path}: '{section}' must be a list, not {_type(items)}")
            for i, item in enumerate(items):
                if not isinstance(item, Mapping) or not item.get("name"):
                    raise ConfigError(f"kubeconfig {path}: {section}[{i}] has no name")
                name = item["name"]
                if not isinstance(name, str):
                    raise ConfigError(
                        f"kubeconfig {path}: {section}[{i}].name must be a string, not {_type(name)}"
                    )
                body = item.get(inner)
                if body is None:
                    body = {}
                if not isinstance(body, Mapping):
                    raise ConfigError(
                        f"kubeconfig {path}: {section}[{i}] ({name!r}): '{inner}' must be a mapping, "
                        f"not {_type(body)}"
                    )
                target.setdefault(name, _Entry(name, body, path, inner))
        current = data.get("current-context")
        if current is not None and not isinstance(current, str):
            raise ConfigError(f"kubeconfig {path}: 'current-context' must be a string, not {_type(current)}")
        if self.current_context is None and current:
            self.current_context = current

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
        cluster_name = _get(ctx, "cluster", str)
        cluster = self.clusters.get(cluster_name) if cluster_name else None
        if cluster is None:
            raise ConfigError(
                f"kubeconfig {ctx.file}: context {name!r} refers to unknown cluster {cluster_name!r}"
            )
        user_name = _get(ctx, "user", str)
        user = self.users.get(user_name) if user_name else None
        if user_name and user is None:
            raise ConfigError(f"kubeconfig {ctx.file}: context {name!r} refers to unknown user {user_name!r}")
        source = f"kubeconfig {ctx.file} (context {name!r})"
        settings: dict[str, Any] = {"source": source, "namespace": _get(ctx, "namespace", str) or "default"}
        settings.update(_cluster_settings(cluster))
        if user is not None:
            settings.update(_user_settings(user))
        if overrides.get("insecure_skip_tls_verify") and not {"ca_data", "ca_file"} & overrides.keys():
            # As kubectl's --insecure-skip-tls-verify: the override drops the file's CA.
            settings.pop("ca_data", None)
            settings.pop("ca_file", None)
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
    # Imported here: an operator in a pod reads no kubeconfig, and PyYAML is ~5% of its import time.
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"kubeconfig {path}:{where} malformed YAML: {getattr(e, 'problem', e)}") from None
    except OSError as e:
        raise ConfigError(f"kubeconfig {path}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"kubeconfig {path}: not UTF-8 text") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"kubeconfig {path}: top level must be a mapping, not {_type(data)}")
    return data


# -- typed field access ----------------------------------------------------------------------------

_TYPE_NAMES: dict[type, str] = {str: "a string", bool: "a boolean", list: "a list", Mapping: "a mapping"}


def _type(value: object) -> str:
    """How YAML would call ``value``'s type, for messages (never the value: it may be a secret)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _check(value: Any, expected: type, where: str, key: str) -> Any:
    """``value`` if it is of ``expected`` type (None stays None), else a ConfigError."""
    if value is None or isinstance(value, expected):
        return value
    message = f"{where}: '{key}' must be {_TYPE_NAMES[expected]}, not {_type(value)}"
    if expected is bool and isinstance(value, str):
        # The classic: insecure-skip-tls-verify: "false" is a non-empty string. kubectl refuses
        # it too; taking its truthiness would turn TLS verification off.
        message += " (write true or false without quotes)"
    elif expected is str and isinstance(value, bool | int | float):
        message += " (quote it)"
    raise ConfigError(message)


def _get(entry: _Entry, key: str, expected: type) -> Any:
    return _check(entry.body.get(key), expected, entry.where, key)


def _resolve(entry: _Entry, value: str) -> str:
    path = os.path.expanduser(value)
    if not os.path.isabs(path):
        path = str(Path(entry.file).resolve().parent / path)
    return path


def _b64(entry: _Entry, key: str) -> bytes | None:
    value = _get(entry, key, str)
    if not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{entry.where}: '{key}' is not valid base64") from None


def _cluster_settings(entry: _Entry) -> dict[str, Any]:
    server = _get(entry, "server", str)
    if not server:
        raise ConfigError(f"kubeconfig {entry.file}: cluster {entry.name!r} has no 'server'")
    out: dict[str, Any] = {"server": server.rstrip("/")}
    ca_data = _b64(entry, "certificate-authority-data")
    ca_file = _get(entry, "certificate-authority", str)
    if ca_data:
        out["ca_data"] = ca_data
    elif ca_file:
        out["ca_file"] = _resolve(entry, ca_file)
    if _get(entry, "insecure-skip-tls-verify", bool):
        if ca_data or ca_file:
            raise ConfigError(
                f"{entry.where}: specifying a root certificates file with the insecure flag is not "
                "allowed (kubectl refuses it too): remove insecure-skip-tls-verify, or "
                "certificate-authority(-data)"
            )
        out["insecure_skip_tls_verify"] = True
    tls_server_name = _get(entry, "tls-server-name", str)
    if tls_server_name:
        out["tls_server_name"] = tls_server_name
    proxy_url = _get(entry, "proxy-url", str)
    if proxy_url:
        out["proxy_url"] = proxy_url
    if _get(entry, "disable-compression", bool):
        out["compression"] = False
    _get(entry, "extensions", list)
    return out


_IMPERSONATION = ("as", "as-uid", "as-groups", "as-user-extra")


def _user_settings(entry: _Entry) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cert_data = _b64(entry, "client-certificate-data")
    cert_file = _get(entry, "client-certificate", str)
    if cert_data:
        out["client_cert_data"] = cert_data
    elif cert_file:
        out["client_cert_file"] = _resolve(entry, cert_file)
    key_data = _b64(entry, "client-key-data")
    key_file = _get(entry, "client-key", str)
    if key_data:
        out["client_key_data"] = key_data
    elif key_file:
        out["client_key_file"] = _resolve(entry, key_file)
    has_cert = "client_cert_data" in out or "client_cert_file" in out
    has_key = "client_key_data" in out or "client_key_file" in out
    if has_cert != has_key:
        missing = "client-key" if has_cert else "client-certificate"
        raise ConfigError(f"kubeconfig {entry.file}: user {entry.name!r} has no {missing}(-data)")
    token = _get(entry, "token", str)
    token_file = _get(entry, "tokenFile", str)
    if token:
        out["token"] = token
    elif token_file:
        out["token_file"] = _resolve(entry, token_file)
    username = _get(entry, "username", str)
    password = _get(entry, "password", str)
    if username:
        out["username"] = username
        out["password"] = password or ""
    spec = _get(entry, "exec", Mapping)
    if spec:
        out["exec"] = _exec_config(entry, spec)
    impersonation = [key for key in _IMPERSONATION if entry.body.get(key) is not None]
    if impersonation:
        # Dropping these silently would act with the user's own (often wider) rights.
        raise ConfigError(
            f"{entry.where}: impersonation ({', '.join(repr(k) for k in impersonation)}) is not "
            "supported from a kubeconfig; remove it, or send Impersonate-User / Impersonate-Group "
            "headers with ClientConfig(extra_headers=...)"
        )
    provider = _get(entry, "auth-provider", Mapping)
    if provider is not None:
        name = _check(provider.get("name"), str, entry.where, "auth-provider.name") or "?"
        raise ConfigError(
            f"kubeconfig {entry.file}: user {entry.name!r} uses auth-provider {name!r}, which "
            "Kubernetes removed in 1.26; use an exec credential plugin instead"
        )
    return out


def _exec_config(entry: _Entry, spec: Mapping[str, Any]) -> ExecConfig:
    where = entry.where

    def get(key: str, expected: type) -> Any:
        return _check(spec.get(key), expected, where, f"exec.{key}")

    command = get("command", str)
    if not command:
        raise ConfigError(f"kubeconfig {entry.file}: user {entry.name!r}: exec has no 'command'")
    api_version = get("apiVersion", str) or ""
    if api_version not in ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"):
        raise ConfigError(
            f"kubeconfig {entry.file}: user {entry.name!r}: exec apiVersion {api_version!r} is not "
            "client.authentication.k8s.io/v1 or v1beta1"
        )
    if os.sep in command or (os.altsep and os.altsep in command):
        command = _resolve(entry, command)
    args: list[str] = []
    for i, arg in enumerate(get("args", list) or ()):
        if not isinstance(arg, str):
            raise ConfigError(f"{where}: 'exec.args[{i}]' must be a string, not {_type(arg)} (quote it)")
        args.append(arg)
    env: dict[str, str] = {}
    for i, item in enumerate(get("env", list) or ()):
        if not isinstance(item, Mapping) or "name" not in item:
            raise ConfigError(f"kubeconfig {entry.file}: user {entry.name!r}: exec.env[{i}] has no name")
        name = _check(item["name"], str, where, f"exec.env[{i}].name")
        value = _check(item.get("value"), str, where, f"exec.env[{i}].value")
        env[name] = value or ""
    mode = get("interactiveMode", str) or "IfAvailable"
    if mode not in ("Never", "IfAvailable", "Always"):
        raise ConfigError(
            f"{where}: 'exec.interactiveMode' must be Never, IfAvailable or Always, not {mode!r}"
        )
    return ExecConfig(
        command=command,
        args=tuple(args),
        env=env,
        api_version=api_version,
        provide_cluster_info=bool(get("provideClusterInfo", bool)),
        install_hint=get("installHint", str) or "",
        interactive_mode=mode,
    )
