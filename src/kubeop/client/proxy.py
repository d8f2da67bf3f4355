"""Which proxy, if any, carries the requests to an API server.

The rules are client-go's, which are Go's ``net/http.ProxyFromEnvironment``, so that kubectl and
kubeop take the same way to a cluster:

* :attr:`ClientConfig.proxy_url <kubeop.client.ClientConfig.proxy_url>` (``proxy-url`` in a
  kubeconfig) wins: every request goes through it; NO_PROXY and the loopback rule below do not
  apply to it.
* Otherwise an ``https`` server uses ``HTTPS_PROXY`` (or ``https_proxy``) and an ``http`` server
  ``HTTP_PROXY`` (or ``http_proxy``). The upper-case name wins; an empty value counts as unset; an
  https server never falls back to HTTP_PROXY. A value without a scheme (``proxy:3128``) means
  ``http://``. Credentials in it (``http://user:password@proxy:3128``) are sent as
  ``Proxy-Authorization`` and never shown.
* ``localhost`` and loopback addresses (127.0.0.0/8, ``::1``) are never proxied, nor is a server
  that ``NO_PROXY`` (or ``no_proxy``) matches (:class:`NoProxy`).
* When ``REQUEST_METHOD`` is set (a CGI program, where a request's ``Proxy:`` header arrives as
  HTTP_PROXY: "httpoxy"), HTTP_PROXY is refused.

Departures from Go: a proxy variable that applies but cannot be used (malformed, a SOCKS proxy)
is a :class:`~kubeop.client.ConfigError` naming the variable, where Go ignores it and connects
directly (fail loudly rather than take another way silently); ``localhost`` is recognised in any
letter case; and the environment is read when each client is created (Go reads it once per
process).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from kubeop.client.config import ClientConfig, ConfigError, check_proxy_url, redact_proxy_url

__all__ = ["NoProxy", "Proxy", "proxy_for"]

_IP = ipaddress.IPv4Address | ipaddress.IPv6Address
_NETWORK = ipaddress.IPv4Network | ipaddress.IPv6Network
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True, repr=False)
class Proxy:
    """The proxy chosen for one server: its URL (credentials included) and where it came from."""

    url: str
    source: str

    def __repr__(self) -> str:
        return f"Proxy({redact_proxy_url(self.url)!r}, source={self.source!r})"

    def __str__(self) -> str:
        return f"proxy {redact_proxy_url(self.url)} (from {self.source})"


def _env(environ: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    """The first of ``names`` set to a non-empty value, and its value (Go's rule)."""
    for name in names:
        value = environ.get(name)
        if value:
            return name, value
    return None


def _ascii_host(host: str) -> str:
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def _ip(host: str) -> _IP | None:
    """An IP literal as an address without its zone (IPv4-mapped IPv6 as IPv4), else None."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.scope_id is not None:
            return ipaddress.IPv6Address(int(ip))
    return ip


def _split_host_port(entry: str) -> tuple[str, str] | None:
    """``host:port`` or ``[v6]:port`` as (host, port) as Go's net.SplitHostPort, else None."""
    colon = entry.rfind(":")
    if colon < 0:
        return None
    if entry.startswith("["):
        end = entry.find("]")
        if end != colon - 1:
            return None  # no port, or something between ']' and ':'
        host = entry[1:end]
    else:
        host = entry[:colon]
        if ":" in host:
            return None  # an IPv6 address without brackets (or garbage): no port
    port = entry[colon + 1 :]
    if "[" in host or "]" in host or "[" in port or "]" in port:
        return None
    return host, port


@dataclass(frozen=True, slots=True)
class NoProxy:
    """A parsed NO_PROXY: which servers are reached directly although a proxy is set.

    The value is a comma-separated list; entries are trimmed and lower-cased, and empty or
    unusable entries are ignored (as Go does, which never fails on NO_PROXY). Each entry is:

    * ``*``: no server is proxied;
    * an IP network in CIDR notation (``10.0.0.0/8``, ``fd00::/8``): servers given by an IP in it;
    * an IP address, optionally with a port (``10.1.2.3``, ``10.1.2.3:6443``, ``[fd00::1]:6443``);
    * a domain, optionally with a port: ``example.com`` matches it and every subdomain,
      ``.example.com`` and ``*.example.com`` subdomains only.

    Names and addresses are compared as written: no DNS lookup, so a domain never matches a server
    given by IP, nor an address a server given by name. ``localhost`` and loopback addresses are
    never proxied whatever NO_PROXY says.
    """

    everything: bool = False
    networks: tuple[_NETWORK, ...] = ()
    addresses: tuple[tuple[_IP, str], ...] = ()
    domains: tuple[tuple[str, bool, str], ...] = ()  # (".suffix", also the name itself, port)

    @classmethod
    def parse(cls, value: str) -> NoProxy:
        networks: list[_NETWORK] = []
        addresses: list[tuple[_IP, str]] = []
        domains: list[tuple[str, bool, str]] = []
        for raw in value.split(","):
            entry = raw.strip().lower()
            if not entry:
                continue
            if entry == "*":
                return cls(everything=True)
            if "/" in entry:
                try:
                    networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    pass  # not a network; as Go, it falls through to a name that matches nothing
                else:
                    continue
            split = _split_host_port(entry)
            host, port = split if split is not None else (entry, "")
            if not host:
                continue  # ":6443": no host
            ip = _ip(host)
            if ip is not None:
                addresses.append((ip, port))
                continue
            if host.startswith("*."):
                host = host[1:]
            whole = not host.startswith(".")
            suffix = "." + _ascii_host(host.removeprefix("."))
            domains.append((suffix, whole, port))
        return cls(networks=tuple(networks), addresses=tuple(addresses), domains=tuple(domains))

    def bypasses(self, host: str, port: int) -> bool:
        """Whether a server at ``host`` (a name or an IP, without brackets) and ``port`` is reached
        directly: it is localhost or a loopback address, or an entry matches it."""
        host = _ascii_host(host.strip().lower())
        if host == "localhost":
            return True
        ip = _ip(host)
        if ip is not None and ip.is_loopback:
            return True
        if self.everything:
            return True
        port_text = str(port)
        if ip is not None:
            for network in self.networks:
                if ip in network or (
                    isinstance(ip, ipaddress.IPv4Address)
                    and isinstance(network, ipaddress.IPv6Network)
                    and ipaddress.IPv6Address(f"::ffff:{ip}") in network
                ):
                    return True
            return any(ip == address and p in ("", port_text) for address, p in self.addresses)
        return any(
            (host.endswith(suffix) or (whole and host == suffix[1:])) and p in ("", port_text)
            for suffix, whole, p in self.domains
        )


def proxy_for(config: ClientConfig, environ: Mapping[str, str]) -> Proxy | None:
    """The proxy for ``config.server``: ``config.proxy_url`` if set, else the one ``environ`` gives
    (see the module's rules), or None for a direct connection.

    Raises :class:`ConfigError` naming the variable when the one that applies is unusable, or when
    HTTP_PROXY would be used in a CGI environment.
    """
    if config.proxy_url:
        return Proxy(config.proxy_url, f"proxy-url of {config.source}")
    parts = urlsplit(config.server)
    https = parts.scheme == "https"
    found = _env(environ, *(("HTTPS_PROXY", "https_proxy") if https else ("HTTP_PROXY", "http_proxy")))
    if found is None:
        return None
    name, value = found
    if not https and environ.get("REQUEST_METHOD"):
        raise ConfigError(
            f"refusing to use {name} for http server {parts.netloc}: REQUEST_METHOD is set, so this "
            "may be a CGI program, where a request's 'Proxy:' header arrives as HTTP_PROXY "
            "(httpoxy); use an https server, or set the proxy explicitly (ClientConfig.proxy_url)"
        )
    try:
        port = parts.port or _DEFAULT_PORTS[parts.scheme]
    except ValueError:
        raise ConfigError(f"{config.source}: the server's port is not a number from 1 to 65535") from None
    no_proxy = _env(environ, "NO_PROXY", "no_proxy")
    if NoProxy.parse(no_proxy[1] if no_proxy else "").bypasses(parts.hostname or "", port):
        return None
    what = f"environment variable {name}"
    try:
        url = check_proxy_url(value, what=what, default_scheme=True)
    except ConfigError as e:
        hint = f"NO_PROXY={parts.hostname}" if parts.hostname else "NO_PROXY"
        raise ConfigError(f"{e}, or unset {name} ({hint} bypasses it for this server)") from None
    return Proxy(url, name)
