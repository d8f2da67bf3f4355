"""ClientConfig: everything needed to reach and authenticate to one API server.

Produced by :func:`~kubeop.client.kubeconfig.load_kubeconfig`, :func:`~kubeop.client.incluster.
in_cluster_config` or written by hand; the client never reads files or the environment on its
own, so tests and multi-cluster programs are explicit about where a connection comes from. The one
exception is the way there: like every Go program (client-go included), the client honours the
proxy variables HTTPS_PROXY, HTTP_PROXY and NO_PROXY (:mod:`kubeop.client.proxy`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["ClientConfig", "ConfigError", "ExecConfig", "load_config"]

REDACTED = "<redacted>"

# RFC 7230 section 3.2.6: token = 1*tchar
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Headers the transport or the HTTP layer own: overriding them would break framing or routing.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
_PROXY_SCHEMES = ("http", "https")
_SOCKS = ("socks4", "socks4a", "socks5", "socks5h")


class ConfigError(Exception):
    """The connection configuration is missing or wrong; the message names the file and field."""


def redact_url(url: str) -> str:
    """``url`` with a password in it (``http://user:secret@proxy``) replaced, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    if "@" not in parts.netloc:
        return url
    # The user name goes too: some proxies take a token as the user name.
    return urlunsplit(parts._replace(netloc=f"{REDACTED}@{parts.netloc.rpartition('@')[2]}"))


def redact_proxy_url(url: str) -> str:
    """A proxy URL for messages: everything before the last ``@`` is replaced.

    Stricter than :func:`redact_url` on purpose: a malformed URL whose
    password holds ``/`` or ``#`` parses with the password outside the host part.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    if "@" in rest:
        rest = f"{REDACTED}@{rest.rpartition('@')[2]}"
    return f"{scheme}{sep}{rest}"


def check_proxy_url(value: str, *, what: str, default_scheme: bool) -> str:
    """``value`` as a usable proxy URL, or a :class:`ConfigError` saying what is wrong with it.

    ``default_scheme`` allows ``host[:port]`` (meaning ``http://``), as in the environment;
    ``what`` names the setting in the message. The URL is returned with its scheme.
    """
    url = value.strip()
    if not url:
        raise ConfigError(f"{what} is empty")
    shown = redact_proxy_url(url)
    fix = "write it as http://[user:password@]host:port (or https://)"
    if any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in url):
        raise ConfigError(f"{what} {shown!r} contains spaces or control characters; {fix}")
    if "://" not in url and default_scheme:
        url = "http://" + url
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme in _SOCKS:
        raise ConfigError(
            f"{what} {shown!r}: SOCKS proxies are not supported by kubeop's client; use an HTTP "
            "proxy (http://host:port), which tunnels https with CONNECT"
        )
    if scheme not in _PROXY_SCHEMES:
        problem = f"the scheme {scheme!r} is not supported" if scheme else "it has no scheme"
        raise ConfigError(f"{what} {shown!r}: {problem}; {fix}")
    if "@" in url:
        fix += "; in the user and password, write / # ? @ as %2F %23 %3F %40"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        # The message of urlsplit may quote the URL: never pass it on.
        problem = "the port is not a number from 1 to 65535" if "port" in str(e).lower() else "malformed"
        raise ConfigError(f"{what} {shown!r}: {problem}; {fix}") from None
    if not parts.hostname:
        raise ConfigError(f"{what} {shown!r} has no host; {fix}")
    if port == 0:
        raise ConfigError(f"{what} {shown!r}: the port is not a number from 1 to 65535; {fix}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"{what} {shown!r} has a path or query (a proxy is a host and port); {fix}")
    return url


_SECRET_WORDS = ("secret", "password", "passwd", "token", "key", "credential")


def redact_args(args: Sequence[str]) -> tuple[str, ...]:
    """Plugin arguments with the values of secret-looking flags replaced.

    ``--oidc-client-secret=X`` and ``--oidc-client-secret X`` both lose ``X``: kubelogin and
    friends take client secrets on the command line.
    """
    out: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next and not arg.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        flag, eq, _ = arg.partition("=")
        secret = flag.startswith("-") and any(w in flag.lower() for w in _SECRET_WORDS)
        if secret and eq:
            out.append(f"{flag}={REDACTED}")
        else:
            out.append(arg)
            hide_next = secret
    return tuple(out)


def _repr(obj: Any, secret: frozenset[str], show: dict[str, str] | None = None) -> str:
    """A dataclass repr that says whether a secret field is set but never shows its value."""
    parts = []
    for f in fields(obj):
        if not f.repr:
            continue
        value = getattr(obj, f.name)
        if show is not None and f.name in show:
            text = show[f.name]
        elif f.name in secret and value:
            text = REDACTED
        elif isinstance(value, bytes):
            text = f"<{len(value)} bytes>"  # PEM: long, and not worth reading in a repr
        else:
            text = repr(value)
        parts.append(f"{f.name}={text}")
    return f"{type(obj).__name__}({', '.join(parts)})"


@dataclass(frozen=True, slots=True, repr=False)
class ExecConfig:
    """An exec credential plugin (``users[].user.exec`` in a kubeconfig).

    ``command`` is resolved like kubectl does: a path with a separator is relative to the
    kubeconfig file's directory, a bare name is looked up on PATH.
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1"
    provide_cluster_info: bool = False
    install_hint: str = ""
    interactive_mode: str = "IfAvailable"

    def __post_init__(self) -> None:
        if not isinstance(self.provide_cluster_info, bool):
            raise ConfigError(f"exec plugin {self.command!r}: provide_cluster_info must be a bool")
        if self.interactive_mode not in _INTERACTIVE_MODES:
            raise ConfigError(
                f"exec plugin {self.command!r}: interactive_mode must be one of "
                f"{', '.join(_INTERACTIVE_MODES)}"
            )

    def __repr__(self) -> str:
        # The environment often carries secrets (client secrets, passwords): show names only.
        env = "{" + ", ".join(f"{k!r}: {REDACTED!r}" for k in self.env) + "}"
        return _repr(self, frozenset(), {"env": env, "args": repr(redact_args(self.args))})


@dataclass(frozen=True, slots=True, repr=False)
class ClientConfig:
    """Connection, TLS, authentication and client-side limits for one API server.

    TLS is verified unless ``insecure_skip_tls_verify`` is set. CA and client certificate/key may
    be given inline (PEM bytes) or as file paths; inline wins when both are set. Of the
    credentials, a static ``token`` wins over ``token_file`` (re-read as it rotates), which wins
    over ``exec``; client certificates can be combined with any of them.

    ``qps``/``burst`` configure the client-side token bucket; ``qps=None`` disables it and leaves
    throttling to the server's priority and fairness. ``compression`` lets the server gzip large
    responses (it only does so above 128 KB). It is on by default, as in client-go, because it
    was measured to win even on loopback: a 10,000-object list arrives in fewer, larger chunks and
    costs the client less CPU than the uncompressed stream (bench/client/RESULTS.md).
    ``proxy_url`` sends every request through an HTTP(S) proxy (``proxy-url`` in a kubeconfig;
    credentials in it go in ``Proxy-Authorization``). Without it, the client takes HTTPS_PROXY,
    HTTP_PROXY and NO_PROXY from the environment when it is created, as client-go does: see
    :mod:`kubeop.client.proxy` for the rules (loopback servers are never proxied).
    ``source`` describes where the config came from (file and context) for error messages.
    ``extra_headers`` are sent with every request; names must be HTTP tokens and values free of
    CR, LF and NUL, and Host, Content-Length, Transfer-Encoding and Connection cannot be set.

    ``repr()`` shows which secrets are set (``token=<redacted>``), never their values.
    """

    server: str
    namespace: str = "default"
    ca_data: bytes | None = None
    ca_file: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    client_cert_data: bytes | None = None
    client_cert_file: str | None = None
    client_key_data: bytes | None = None
    client_key_file: str | None = None
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    exec: ExecConfig | None = None
    qps: float | None = 50.0
    burst: int = 100
    max_retries: int = 5
    request_timeout: float = 60.0
    connect_timeout: float = 10.0
    max_connections: int = 100
    compression: bool = True
    proxy_url: str | None = None
    user_agent: str = "kubeop"
    source: str = "explicit configuration"
    extra_headers: Sequence[tuple[str, str]] = ()

    def __post_init__(self) -> None:
        if not self.server:
            raise ConfigError(f"{self.source}: no server URL")
        if not isinstance(self.server, str) or not self.server.startswith(("https://", "http://")):
            shown = redact_url(self.server) if isinstance(self.server, str) else type(self.server).__name__
            raise ConfigError(f"{self.source}: server {shown!r} is not an http(s) URL")
        if "@" in self.server.split("/", 3)[2]:
            # Never used for authentication, and it would be echoed in connection errors.
            raise ConfigError(
                f"{self.source}: server {redact_url(self.server)!r} has credentials in it; "
                "use token or username/password instead"
            )
        for name in ("insecure_skip_tls_verify", "compression"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(
                    f"{self.source}: {name} must be a bool, not {type(getattr(self, name)).__name__}"
                )
        if self.insecure_skip_tls_verify and (self.ca_data or self.ca_file):
            # As client-go: a CA that is then not used for verification is a mistake either way.
            raise ConfigError(
                f"{self.source}: specifying a root certificates file with the insecure flag is not "
                "allowed (set either insecure_skip_tls_verify or ca_data/ca_file, not both)"
            )
        if self.qps is not None and self.qps <= 0:
            raise ConfigError(f"{self.source}: qps must be positive or None (no client-side limit)")
        if self.burst < 1:
            raise ConfigError(f"{self.source}: burst must be at least 1")
        if self.proxy_url:
            if not isinstance(self.proxy_url, str):
                raise ConfigError(f"{self.source}: proxy_url must be a string")
            # As client-go, the scheme is required here (the environment's proxies may omit it).
            url = check_proxy_url(self.proxy_url, what=f"{self.source}: proxy-url", default_scheme=False)
            object.__setattr__(self, "proxy_url", url)
        # Normalised to a tuple of pairs: a mapping is accepted, and the config stays immutable.
        object.__setattr__(self, "extra_headers", _check_headers(self.extra_headers, self.source))

    def __repr__(self) -> str:
        show = {
            "server": repr(redact_url(self.server)),
            "extra_headers": "(" + "".join(f"({n!r}, {REDACTED!r}), " for n, _ in self.extra_headers) + ")",
        }
        if self.proxy_url:
            show["proxy_url"] = repr(redact_proxy_url(self.proxy_url))
        return _repr(self, frozenset({"token", "password", "client_key_data"}), show)

    def with_options(self, **changes: object) -> ClientConfig:
        """A copy with some fields changed (``config.with_options(qps=None, namespace="x")``)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _check_headers(headers: object, source: str) -> tuple[tuple[str, str], ...]:
    if isinstance(headers, Mapping):
        items: list[object] = list(headers.items())
    elif isinstance(headers, Sequence) and not isinstance(headers, str | bytes):
        items = list(headers)
    else:
        raise ConfigError(f"{source}: extra_headers must be a mapping or a sequence of (name, value) pairs")
    out: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        if not (isinstance(item, tuple | list) and len(item) == 2):
            raise ConfigError(f"{source}: extra_headers[{i}] is not a (name, value) pair")
        name, value = item
        if not isinstance(name, str):
            raise ConfigError(f"{source}: extra_headers[{i}]: the name must be a string")
        if not _TOKEN.fullmatch(name):
            # Named by its valid beginning only: "Authorization: Bearer ..." must not be echoed.
            valid = _TOKEN.match(name)
            end = valid.end() if valid else 0
            what = f"extra header {name[:end]!r}" if end else f"extra_headers[{i}]"
            problem = f"contains {name[end]!r}" if end < len(name) else "is empty"
            raise ConfigError(
                f"{source}: {what}: the name {problem}; a header name is letters, digits and "
                "!#$%&'*+-.^_`|~ only (no spaces, colons, line breaks)"
            )
        if name.lower() in _RESERVED_HEADERS:
            raise ConfigError(f"{source}: extra header {name!r} cannot be set: the HTTP client manages it")
        if not isinstance(value, str):
            raise ConfigError(f"{source}: extra header {name!r}: the value must be a string")
        if "\r" in value or "\n" in value or "\0" in value:
            raise ConfigError(f"{source}: extra header {name!r}: the value contains CR, LF or NUL")
        out.append((name, value))
    return tuple(out)


def load_config(*, context: str | None = None, kubeconfig: str | Sequence[str] | None = None) -> ClientConfig:
    """The config a program would use by default, in kubectl's order.

    An explicit ``kubeconfig`` path (or paths) first; otherwise ``$KUBECONFIG`` or
    ``~/.kube/config`` if it exists; otherwise the in-cluster service account. Raises
    :class:`ConfigError` saying what was tried when none is usable.
    """
    # Imported here: both modules build ClientConfig, so they import this one.
    from kubeop.client.incluster import in_cluster_config, is_in_cluster
    from kubeop.client.kubeconfig import default_kubeconfig_paths, load_kubeconfig

    if kubeconfig is not None:
        return load_kubeconfig(kubeconfig, context=context)
    paths = default_kubeconfig_paths()
    if any(os.path.exists(p) for p in paths):
        return load_kubeconfig(paths, context=context)
    if is_in_cluster():
        return in_cluster_config()
    raise ConfigError(
        f"no Kubernetes configuration found: tried kubeconfig {', '.join(paths) or '(none)'} "
        "and the in-cluster service account (KUBERNETES_SERVICE_HOST is not set)"
    )
