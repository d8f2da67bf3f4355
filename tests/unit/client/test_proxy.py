"""Proxies from the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) with client-go's rules, which are
Go's net/http ones: the NO_PROXY matcher, the choice of variable, and requests through a local
CONNECT proxy to a TLS server known by a name only that proxy can resolve."""

from __future__ import annotations

import pytest

from kubeop.client import ClientConfig, ConfigError
from kubeop.client.proxy import NoProxy, Proxy, proxy_for

_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")

# -- NO_PROXY ------------------------------------------------------------------------------------

# Our own table, after the categories of Go's httpproxy tests (TestUseProxy, TestInvalidNoProxy,
# the IPv6-zone case of CVE-2025-22870 and the IDNA cases): (NO_PROXY, host, port, reached directly).
_NO_PROXY_CASES = [
    # localhost and loopback addresses are never proxied, whatever NO_PROXY says
    ("", "localhost", 6443, True),
    ("", "LOCALHOST", 6443, True),
    ("", "127.0.0.1", 6443, True),
    ("", "127.9.8.7", 443, True),
    ("", "::1", 443, True),
    ("", "::ffff:127.0.0.1", 443, True),
    ("", "::2", 443, False),
    ("", "localhost.localdomain", 443, False),  # only the exact name "localhost"
    ("", "api.localhost", 443, False),
    ("", "10.0.0.1", 443, False),
    # "*" alone: nothing is proxied; inside a list it is still "everything"
    ("*", "api.corp.example", 6443, True),
    ("a.example, *", "10.1.1.1", 6443, True),
    ("*.", "api.example", 6443, False),  # not "*": a name that matches nothing useful
    # domains: the name and its subdomains; a leading "." or "*." subdomains only
    ("corp.example", "corp.example", 6443, True),
    ("corp.example", "api.corp.example", 6443, True),
    ("corp.example", "a.b.corp.example", 6443, True),
    ("corp.example", "notcorp.example", 6443, False),
    ("corp.example", "corp.example.org", 6443, False),
    (".corp.example", "corp.example", 6443, False),
    (".corp.example", "api.corp.example", 6443, True),
    ("*.corp.example", "corp.example", 6443, False),
    ("*.corp.example", "api.corp.example", 6443, True),
    ("*.corp.example", "xcorp.example", 6443, False),
    ("Corp.EXAMPLE", "api.corp.example", 6443, True),  # case-insensitive
    ("corp.example", "API.Corp.Example", 6443, True),
    # ports: an entry with a port matches that port only
    ("corp.example:6443", "api.corp.example", 6443, True),
    ("corp.example:6443", "api.corp.example", 443, False),
    ("corp.example:", "api.corp.example", 443, True),  # an empty port is no port
    # IP addresses: exact, with or without port, v4-mapped v6 equal to v4, zones ignored
    ("10.1.2.3", "10.1.2.3", 6443, True),
    ("10.1.2.3", "10.1.2.4", 6443, False),
    ("10.1.2.3:6443", "10.1.2.3", 6443, True),
    ("10.1.2.3:443", "10.1.2.3", 6443, False),
    ("::ffff:10.1.2.3", "10.1.2.3", 6443, True),
    ("10.1.2.3", "::ffff:10.1.2.3", 6443, True),
    ("fd00::1", "fd00::1", 6443, True),
    ("fd00::1", "fd00::2", 6443, False),
    ("[fd00::1]:6443", "fd00::1", 6443, True),
    ("[fd00::1]:443", "fd00::1", 6443, False),
    ("fd00::1", "fd00::1%eth0", 6443, True),
    ("[fd00::1]", "fd00::1", 6443, False),  # brackets without a port: not an address (as Go)
    # CIDRs: servers given by an IP inside; host bits allowed
    ("10.0.0.0/8", "10.200.0.1", 6443, True),
    ("10.0.0.0/8", "11.0.0.1", 6443, False),
    ("10.0.0.1/30", "10.0.0.3", 6443, True),
    ("10.0.0.1/30", "10.0.0.4", 6443, False),
    ("fd00::/8", "fdff::1", 6443, True),
    ("fd00::/8", "fe00::1", 6443, False),
    ("::ffff:10.0.0.0/104", "10.9.9.9", 6443, True),
    # no DNS: names never match addresses, nor addresses names
    ("10.0.0.0/8", "api.corp.example", 6443, False),
    ("10.1.2.3", "api.corp.example", 6443, False),
    ("1.2.3", "10.1.2.3", 6443, False),  # a "domain" that is the tail of an IP does not match
    ("example.com", "1000::%25.example.com", 123, False),  # CVE-2025-22870: a zone is no domain
    # IDNA: Unicode and punycode forms of one name match each other
    (".示例.com", "www.xn--fsq092h.com", 443, True),
    ("xn--fsq092h.com", "www.示例.com", 443, True),
    ("示例.com", "www.示例.com", 443, True),
    # lists: whitespace around entries, empty and malformed entries are ignored
    (" a.example ,, b.example ,", "b.example", 443, True),
    (",,,", "a.example", 443, False),
    (":1", "a.example", 443, False),  # no host: ignored (Go's TestInvalidNoProxy)
    ("10.0.0.0/33, b.example", "b.example", 443, True),
    ("10.0.0.0/33", "10.0.0.1", 443, False),
    ("a b.example", "b.example", 443, False),
]


@pytest.mark.parametrize(("no_proxy", "host", "port", "direct"), _NO_PROXY_CASES)
def test_no_proxy_matches_as_go(no_proxy: str, host: str, port: int, direct: bool) -> None:
    assert NoProxy.parse(no_proxy).bypasses(host, port) is direct


def test_no_proxy_of_go_httpproxy_list() -> None:
    # The list of Go's TestUseProxy, written the way a cluster's NO_PROXY is: every kind at once.
    parsed = NoProxy.parse(
        "corp.example, .svc, *.internal.example, 192.168.1.1, 192.168.1.2:81, 192.168.1.3:443, "
        "10.96.0.0/12, 2001:db8::1, [2001:db8::2]:443, 2002:db8::/64"
    )
    direct = ["corp.example", "x.svc", "a.internal.example", "192.168.1.1", "192.168.1.3", "10.96.0.1"]
    direct += ["2001:db8::1", "2001:db8::2", "2002:db8::7"]
    proxied = ["svc", "internal.example", "192.168.1.2", "10.112.0.1", "2001:db8::3", "xcorp.example"]
    assert all(parsed.bypasses(h, 443) for h in direct)
    assert not any(parsed.bypasses(h, 443) for h in proxied)


# -- choosing the proxy ------------------------------------------------------------------------


def _choose(server: str, env: dict[str, str], **config: object) -> Proxy | None:
    return proxy_for(ClientConfig(server=server, **config), env)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("server", "env", "want"),
    [
        # the upper-case name wins; an empty value counts as unset
        ("https://a.example", {"HTTPS_PROXY": "http://up:1", "https_proxy": "http://low:1"}, "http://up:1"),
        ("https://a.example", {"HTTPS_PROXY": "", "https_proxy": "http://low:1"}, "http://low:1"),
        ("https://a.example", {"https_proxy": "http://low:1"}, "http://low:1"),
        # an https server uses HTTPS_PROXY only, an http server HTTP_PROXY only
        ("https://a.example", {"HTTP_PROXY": "http://plain:1"}, None),
        ("http://a.example", {"HTTPS_PROXY": "http://secure:1"}, None),
        ("http://a.example", {"HTTP_PROXY": "http://plain:1", "HTTPS_PROXY": "http://s:1"}, "http://plain:1"),
        ("http://a.example", {"http_proxy": "http://plain:1"}, "http://plain:1"),
        # a value without scheme is http; https proxies are kept
        ("https://a.example", {"HTTPS_PROXY": "proxy.corp:3128"}, "http://proxy.corp:3128"),
        ("https://a.example", {"HTTPS_PROXY": "proxy"}, "http://proxy"),
        ("https://a.example", {"HTTPS_PROXY": "10.0.0.9:3128"}, "http://10.0.0.9:3128"),
        ("https://a.example", {"HTTPS_PROXY": "https://proxy.corp"}, "https://proxy.corp"),
        ("https://a.example", {"HTTPS_PROXY": " http://proxy.corp:3128/ "}, "http://proxy.corp:3128/"),
        # NO_PROXY (either case; upper wins) and loopback
        ("https://a.example", {"HTTPS_PROXY": "p:1", "NO_PROXY": "a.example"}, None),
        ("https://a.example", {"HTTPS_PROXY": "p:1", "no_proxy": "a.example"}, None),
        (
            "https://a.example",
            {"HTTPS_PROXY": "p:1", "NO_PROXY": "b.example", "no_proxy": "a.example"},
            "http://p:1",
        ),
        ("https://a.example:6443", {"HTTPS_PROXY": "p:1", "NO_PROXY": "a.example:443"}, "http://p:1"),
        ("https://a.example", {"HTTPS_PROXY": "p:1", "NO_PROXY": "a.example:443"}, None),  # default port
        ("http://a.example", {"HTTP_PROXY": "p:1", "NO_PROXY": "a.example:80"}, None),
        ("https://127.0.0.1:6443", {"HTTPS_PROXY": "p:1"}, None),
        ("https://[::1]:6443", {"HTTPS_PROXY": "p:1"}, None),
        ("https://localhost:6443", {"HTTPS_PROXY": "p:1"}, None),
        ("https://10.96.0.1", {"HTTPS_PROXY": "p:1", "NO_PROXY": "10.96.0.0/12"}, None),
        ("https://10.96.0.1", {"HTTPS_PROXY": "p:1", "NO_PROXY": ".svc"}, "http://p:1"),
        # REQUEST_METHOD (CGI) only refuses HTTP_PROXY: HTTPS_PROXY stays in use, as in Go
        ("https://a.example", {"HTTPS_PROXY": "p:1", "REQUEST_METHOD": "GET"}, "http://p:1"),
    ],
)
def test_the_proxy_variable_that_applies(server: str, env: dict[str, str], want: str | None) -> None:
    chosen = _choose(server, env)
    assert (chosen.url if chosen else None) == want


def test_proxy_url_wins_over_the_environment_and_ignores_no_proxy_and_loopback() -> None:
    env = {"HTTPS_PROXY": "http://env:1", "NO_PROXY": "*"}
    chosen = _choose("https://127.0.0.1:6443", env, proxy_url="http://kubeconfig:3128", source="kc")
    assert chosen == Proxy("http://kubeconfig:3128", "proxy-url of kc")


def test_http_proxy_is_refused_in_a_cgi_environment() -> None:
    env = {"HTTP_PROXY": "http://attacker:1", "REQUEST_METHOD": "POST", "NO_PROXY": "*"}
    with pytest.raises(ConfigError, match=r"refusing to use HTTP_PROXY .*REQUEST_METHOD.*httpoxy"):
        _choose("http://a.example", env)
    assert _choose("http://a.example", {"HTTP_PROXY": "http://p:1", "REQUEST_METHOD": ""}) is not None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("socks5://alice:hunter2@p:1080", "SOCKS proxies are not supported"),
        ("socks5h://p:1080", "SOCKS proxies are not supported"),
        ("ftp://alice:hunter2@p:21", "the scheme 'ftp' is not supported"),
        ("http://alice:hunter2@p:notaport", "the port is not a number"),
        ("http://alice:hunter2@p:70000", "the port is not a number"),
        ("http://alice:hunter2@p:0", "the port is not a number"),
        ("http://alice:hun/ter2@p:3128", "the port is not a number"),  # '/' in the password, unescaped
        ("http://alice:hunter2@", "has no host"),
        ("http://alice:hunter2@p:3128/proxy.pac", "has a path or query"),
        ("http://alice:hunter2@p:3128?x=1", "has a path or query"),
        ("http://alice:hunter2@p :3128", "spaces or control characters"),
        ("http://alice:hunter2@p:3128\r\nX: y", "spaces or control characters"),
    ],
)
def test_a_malformed_proxy_variable_is_an_error_naming_it_never_showing_credentials(
    value: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as e:
        _choose("https://a.example", {"HTTPS_PROXY": value})
    text = str(e.value)
    assert text.startswith("environment variable HTTPS_PROXY ") and problem in text
    assert "http://[user:password@]host:port" in text or "SOCKS" in text
    assert "unset HTTPS_PROXY (NO_PROXY=a.example bypasses it" in text
    assert "hunter2" not in text and "hun/" not in text and "alice" not in text


def test_a_malformed_variable_that_does_not_apply_is_no_error() -> None:
    # As Go: HTTP_PROXY does not matter to an https server, nor HTTPS_PROXY to one NO_PROXY matches.
    assert _choose("https://a.example", {"HTTP_PROXY": "ftp://x"}) is None
    assert _choose("https://a.example", {"HTTPS_PROXY": "ftp://x", "NO_PROXY": "a.example"}) is None
    assert _choose("https://127.0.0.1", {"HTTPS_PROXY": "ftp://x"}) is None


def test_proxy_url_in_the_config_is_checked_and_redacted() -> None:
    cfg = ClientConfig(server="https://a", proxy_url=" http://alice:hunter2@p:3128 ", source="kc")
    assert cfg.proxy_url == "http://alice:hunter2@p:3128"
    assert "hunter2" not in repr(cfg) and "alice" not in repr(cfg) and "<redacted>@p:3128" in repr(cfg)
    for bad, problem in (
        ("proxy:3128", "it has no scheme"),  # required here, as in client-go
        ("http://user:hunt/er2@p:3128", "the port is not a number"),
        ("socks5://p:1080", "SOCKS proxies are not supported"),
    ):
        with pytest.raises(ConfigError, match=r"^kc: proxy-url ") as e:
            ClientConfig(server="https://a", proxy_url=bad, source="kc")
        assert problem in str(e.value) and "hunt" not in str(e.value)


def test_the_chosen_proxy_never_shows_its_credentials() -> None:
    chosen = Proxy("http://alice:hunter2@p:3128", "HTTPS_PROXY")
    for text in (repr(chosen), str(chosen)):
        assert "hunter2" not in text and "alice" not in text and "p:3128" in text and "HTTPS_PROXY" in text
