"""Request authentication: static tokens, rotating token files, basic auth and exec plugins.

Every authenticator answers two questions: :meth:`Auth.credentials` (the headers, and possibly a
client certificate, to use now; cheap, cached) and :meth:`Auth.refresh` (called after a 401: get
fresh credentials if that could help, and say whether a retry is worth it). The transport retries
a request after a successful refresh, which is how expired exec tokens and rotated
service-account tokens recover without the caller noticing.

Refreshes are shared. The built-in authenticators number their credentials (``generation``); a
request that got a 401 with generation *g* refreshes only if *g* is still current, and otherwise
just retries with the newer credentials someone else already fetched. So a token-file rotation
or an expired exec token costs one re-read or one plugin run however many requests were in
flight (:func:`refresh_after_unauthorized`), as client-go does.

Nothing here shows a secret: ``repr()`` of credentials and authenticators says that a token is
set, not what it is, and an exec plugin's output is never copied into an error (its stderr,
the plugin's own diagnostics, is, truncated).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from kubeop.client.config import REDACTED, ClientConfig, ConfigError, ExecConfig

__all__ = [
    "Auth",
    "BasicAuth",
    "Credentials",
    "ExecAuth",
    "NoAuth",
    "SharedRefresh",
    "StaticToken",
    "TokenFile",
    "auth_for",
    "refresh_after_unauthorized",
]

Clock = Callable[[], float]

log = logging.getLogger("kubeop.client")


@dataclass(frozen=True, slots=True, repr=False)
class Credentials:
    """What to attach to requests: extra headers and, from exec plugins, a client cert/key (PEM).

    ``generation`` numbers the credentials an authenticator has handed out (it is not part of
    equality); see :func:`refresh_after_unauthorized`. ``repr()`` shows header names only.
    """

    headers: dict[str, str] = field(default_factory=dict)
    client_cert: tuple[bytes, bytes] | None = None
    generation: int = field(default=0, compare=False)

    def __repr__(self) -> str:
        headers = "{" + ", ".join(f"{name!r}: {REDACTED!r}" for name in self.headers) + "}"
        cert = "None" if self.client_cert is None else f"({REDACTED!r}, {REDACTED!r})"
        return f"Credentials(headers={headers}, client_cert={cert}, generation={self.generation})"


class Auth(Protocol):
    """How a client authenticates: the headers of each request, renewed after a 401."""

    async def credentials(self) -> Credentials:
        """The headers (and client certificate, if any) to send with the next request."""

    async def refresh(self) -> bool:
        """After a 401: renew what can be renewed; True if retrying the request may now succeed."""
        ...


class _Generations:
    """Shared refresh for the built-in authenticators: see :func:`refresh_after_unauthorized`.

    ``generation`` is the generation of the credentials :meth:`credentials` hands out now; a
    subclass bumps it whenever it replaces them with different ones.
    """

    generation = 0
    _refresh_lock: asyncio.Lock | None = None

    async def refresh(self) -> bool:
        return False

    async def refresh_stale(self, used: Credentials) -> bool:
        if used.generation != self.generation:
            return True  # already renewed since that request was sent: just retry
        if self._refresh_lock is None:
            self._refresh_lock = asyncio.Lock()
        async with self._refresh_lock:
            if used.generation != self.generation:
                return True  # renewed while we waited for the lock
            return await self.refresh()


SharedRefresh = _Generations
"""The base of an authenticator whose concurrent 401s share one :meth:`refresh`: hand out
:class:`Credentials` numbered with ``generation`` and bump it whenever they are replaced."""


async def refresh_after_unauthorized(auth: Auth, used: Credentials) -> bool:
    """After a 401 for a request sent with ``used``: renew once, and say if a retry is worth it.

    With the built-in authenticators, concurrent 401s for the same credentials share one refresh
    (one re-read of a token file, one run of an exec plugin); a request whose credentials were
    already replaced retries with the new ones without refreshing again. Other :class:`Auth`
    implementations get a plain :meth:`Auth.refresh`, and a retry also when their credentials
    changed meanwhile.
    """
    if isinstance(auth, _Generations):
        return await auth.refresh_stale(used)
    if await auth.refresh():
        return True
    return await auth.credentials() != used


class NoAuth(_Generations):
    """No credentials: for an API server that allows anonymous requests, or one reached through a proxy that
    authenticates.
    """

    async def credentials(self) -> Credentials:
        """Empty credentials."""
        return Credentials()

    def __repr__(self) -> str:
        return "NoAuth()"


class StaticToken(_Generations):
    """A bearer token that never changes (a kubeconfig's ``token``); it is never shown in a repr."""

    def __init__(self, token: str) -> None:
        self._creds = Credentials({"Authorization": f"Bearer {token}"})

    async def credentials(self) -> Credentials:
        """The ``Authorization: Bearer`` header."""
        return self._creds

    def __repr__(self) -> str:
        return f"StaticToken(token={REDACTED})"


class BasicAuth(_Generations):
    """HTTP basic authentication (a kubeconfig's ``username`` and ``password``); the password is never shown
    in a repr.
    """

    def __init__(self, username: str, password: str) -> None:
        self.username = username
        raw = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        self._creds = Credentials({"Authorization": f"Basic {raw}"})

    async def credentials(self) -> Credentials:
        """The ``Authorization: Basic`` header."""
        return self._creds

    def __repr__(self) -> str:
        return f"BasicAuth(username={self.username!r}, password={REDACTED})"


class TokenFile(_Generations):
    """A bearer token read from a file and re-read at most every ``reload_after`` seconds.

    The same cadence as client-go (one minute): projected service-account tokens are rewritten by
    the kubelet long before they expire, so a minute-old copy is always still valid.
    """

    def __init__(self, path: str, *, reload_after: float = 60.0, clock: Clock = time.monotonic) -> None:
        self.path = path
        self.reload_after = reload_after
        self._clock = clock
        self._creds: Credentials | None = None
        self._read_at = 0.0

    def _read(self) -> Credentials:
        try:
            with open(self.path, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as e:
            raise ConfigError(f"cannot read token file {self.path}: {e.strerror}") from None
        if not token:
            raise ConfigError(f"token file {self.path} is empty")
        self._read_at = self._clock()
        header = f"Bearer {token}"
        if self._creds is not None and self._creds.headers.get("Authorization") == header:
            return self._creds  # unchanged: same generation
        self.generation += 1
        return Credentials({"Authorization": header}, generation=self.generation)

    async def credentials(self) -> Credentials:
        """The token read from the file, read again once ``reload_after`` seconds have passed (a projected
        service account token rotates).
        """
        if self._creds is None or self._clock() - self._read_at >= self.reload_after:
            self._creds = self._read()
        return self._creds

    async def refresh(self) -> bool:
        """Read the file again after a 401; True when it held another token."""
        old = self._creds
        self._creds = self._read()
        return self._creds is not old

    def __repr__(self) -> str:
        return f"TokenFile(path={self.path!r}, token={REDACTED if self._creds else None})"


class ExecAuth(_Generations):
    """Credentials from an exec plugin (client.authentication.k8s.io v1 or v1beta1).

    The plugin's answer is cached until its ``expirationTimestamp`` (forever if it has none) and
    re-run after a 401. Concurrent callers share one run of the plugin.

    The plugin runs in a session (process group) of its own, and the whole group is killed when
    it does not answer within ``timeout`` seconds or the caller is cancelled: a shell script that
    left a child holding its stdout must not keep the caller (and every request waiting for
    credentials) past the timeout.
    """

    def __init__(
        self,
        spec: ExecConfig,
        *,
        cluster: dict[str, Any] | None = None,
        source: str = "kubeconfig",
        timeout: float = 120.0,
        clock: Clock = time.time,
    ) -> None:
        self.spec = spec
        self.cluster = cluster
        self.source = source
        self.timeout = timeout
        self._clock = clock
        self._creds: Credentials | None = None
        self._expires_at: float | None = None
        self._lock = asyncio.Lock()
        self.runs = 0

    def __repr__(self) -> str:
        token = REDACTED if self._creds is not None else None
        return f"ExecAuth(spec={self.spec!r}, source={self.source!r}, credentials={token})"

    async def credentials(self) -> Credentials:
        """The credentials the exec plugin returned, running it again when they have expired (one run at a
        time).
        """
        if self._valid():
            assert self._creds is not None
            return self._creds
        async with self._lock:
            if not self._valid():
                await self._run()
        assert self._creds is not None
        return self._creds

    async def refresh(self) -> bool:
        """Run the exec plugin again after a 401; always True (its new credentials may be accepted)."""
        async with self._lock:
            await self._run()
        return True

    def _valid(self) -> bool:
        if self._creds is None:
            return False
        return self._expires_at is None or self._clock() < self._expires_at

    def _exec_info(self) -> bytes:
        spec: dict[str, Any] = {"interactive": False}
        if self.spec.provide_cluster_info and self.cluster is not None:
            spec["cluster"] = self.cluster
        return orjson.dumps({"apiVersion": self.spec.api_version, "kind": "ExecCredential", "spec": spec})

    async def _run(self) -> None:
        spec = self.spec
        what = f"{self.source}: exec plugin {spec.command!r}"
        if spec.interactive_mode == "Always":
            raise ConfigError(f"{what} requires an interactive terminal (interactiveMode: Always)")
        env = {**os.environ, **spec.env, "KUBERNETES_EXEC_INFO": self._exec_info().decode()}
        loop = asyncio.get_running_loop()
        output = _PluginOutput(loop)
        try:
            transport, _ = await loop.subprocess_exec(
                lambda: output,
                spec.command,
                *spec.args,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own process group, killed as a whole on timeout
            )
        except OSError as e:
            hint = f"; {spec.install_hint.strip()}" if spec.install_hint else ""
            raise ConfigError(f"{what} cannot be started: {e.strerror or e}{hint}") from None
        pid = transport.get_pid()
        try:
            try:
                async with asyncio.timeout(self.timeout):
                    await output.exited
                    # Everything the plugin wrote is in the pipes now. A child it left behind
                    # may still hold them open; do not wait for that child.
                    await asyncio.wait([output.closed], timeout=_DRAIN_GRACE)
            except TimeoutError:
                _kill_group(pid)
                await asyncio.wait([output.exited], timeout=1.0)
                raise ConfigError(
                    f"{what} did not answer within {self.timeout:g} s (killed it and its children)"
                    f"{_stderr_tail(output.stderr)}"
                ) from None
            except BaseException:  # cancelled: do not leave the plugin running
                _kill_group(pid)
                raise
        finally:
            transport.close()
        self.runs += 1
        status = transport.get_returncode()
        if status != 0:
            tail = _stderr_tail(output.stderr) or ": (nothing on stderr)"
            raise ConfigError(f"{what} exited with status {status}{tail}")
        if output.overflow:
            raise ConfigError(f"{what} printed more than {_MAX_OUTPUT // 2**20} MiB on stdout")
        creds, expires_at = self._parse(bytes(output.stdout), what)
        self.generation += 1
        self._creds = Credentials(creds.headers, creds.client_cert, generation=self.generation)
        self._expires_at = expires_at

    def _parse(self, out: bytes, what: str) -> tuple[Credentials, float | None]:
        # Never quote stdout in these messages: it is a credential, or half of one.
        try:
            doc = orjson.loads(out)
        except orjson.JSONDecodeError:
            size = f"{len(out)} bytes" if out.strip() else "nothing"
            raise ConfigError(
                f"{what} printed output that is not JSON ({size} on stdout, not shown)"
            ) from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{what} printed JSON that is not an object (an ExecCredential is expected)")
        if doc.get("kind") != "ExecCredential":
            raise ConfigError(
                f"{what} printed kind {_shown(doc.get('kind'), _KIND)}, expected ExecCredential"
            )
        if doc.get("apiVersion") != self.spec.api_version:
            raise ConfigError(
                f"{what} answered apiVersion {_shown(doc.get('apiVersion'), _API_VERSION)}, "
                f"expected {self.spec.api_version!r}"
            )
        status = doc.get("status")
        if status is None:
            status = {}
        if not isinstance(status, dict):
            raise ConfigError(f"{what}: the ExecCredential's status is not an object")
        token = status.get("token")
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        for name, value in (("token", token), ("clientCertificateData", cert), ("clientKeyData", key)):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{what}: status.{name} is not a string")
        if bool(cert) != bool(key):
            raise ConfigError(f"{what} returned only one of status.clientCertificateData / clientKeyData")
        if not token and not cert:
            raise ConfigError(
                f"{what} returned no credential: status.token and status.clientCertificateData/"
                "clientKeyData are all missing or empty"
            )
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        pair = (str(cert).encode(), str(key).encode()) if cert and key else None
        expires_at: float | None = None
        stamp = status.get("expirationTimestamp")
        if stamp:
            try:
                when = datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
                if when.tzinfo is None:
                    raise ValueError("no time zone")
            except ValueError:
                raise ConfigError(
                    f"{what}: status.expirationTimestamp is not an RFC 3339 time with a time zone"
                ) from None
            expires_at = when.timestamp()
            if expires_at <= self._clock():
                # As client-go: used for this request, and the plugin runs again for the next one.
                # Not an error: a local clock running ahead of the plugin's would make it one.
                log.warning(
                    "%s returned a credential that already expired (status.expirationTimestamp %s); "
                    "check the plugin and this machine's clock",
                    what,
                    when.astimezone(UTC).isoformat(),
                )
        return Credentials(headers, pair), expires_at


# After the plugin exits, how long its pipes may stay open (a child it left behind holds them).
_DRAIN_GRACE = 0.5
# An ExecCredential is a few KB; more than this on stdout is not one.
_MAX_OUTPUT = 4 * 2**20
_STDERR_TAIL = 1024
# What the plugin's apiVersion and kind may be quoted as: their vocabulary, nothing token-like.
_API_VERSION = re.compile(r"([a-z0-9-]+(\.[a-z0-9-]+)*/)?v[0-9]+((alpha|beta)[0-9]+)?")
_KIND = re.compile(r"[A-Z][A-Za-z]{0,62}")


class _PluginOutput(asyncio.SubprocessProtocol):
    """Collects an exec plugin's stdout (bounded) and the tail of its stderr."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.overflow = False
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        if fd == 1:
            if len(self.stdout) + len(data) > _MAX_OUTPUT:
                self.overflow = True
            else:
                self.stdout += data
        else:
            self.stderr += data
            del self.stderr[: -4 * _STDERR_TAIL]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


def _kill_group(pid: int | None) -> None:
    """SIGKILL the plugin's process group (its pid: it was started with a new session)."""
    if pid is None:
        return
    try:
        if hasattr(os, "killpg"):
            os.killpg(pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows has no process groups of this kind
            os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def _stderr_tail(err: bytes | bytearray) -> str:
    """``": <the end of stderr>"``, at most ~1 KB, or "" if the plugin wrote nothing there."""
    text = bytes(err).decode("utf-8", "replace").strip()
    if not text:
        return ""
    if len(text) > _STDERR_TAIL:
        text = "..." + text[-_STDERR_TAIL:]
    return f": {text}"


def _shown(value: object, pattern: re.Pattern[str]) -> str:
    """An apiVersion or kind from the plugin's output if it looks like one, else its type only."""
    if value is None:
        return "(none)"
    if isinstance(value, str) and pattern.fullmatch(value):
        return repr(value)
    return f"(a {type(value).__name__}, not shown)"


def auth_for(config: ClientConfig) -> Auth:
    """The authenticator a config asks for (client certificates are handled by TLS, not here)."""
    if config.token:
        return StaticToken(config.token)
    if config.token_file:
        return TokenFile(config.token_file)
    if config.exec is not None:
        cluster: dict[str, Any] = {"server": config.server}
        if config.ca_data:
            cluster["certificate-authority-data"] = base64.b64encode(config.ca_data).decode("ascii")
        if config.insecure_skip_tls_verify:
            cluster["insecure-skip-tls-verify"] = True
        if config.tls_server_name:
            cluster["tls-server-name"] = config.tls_server_name
        return ExecAuth(config.exec, cluster=cluster, source=config.source)
    if config.username:
        return BasicAuth(config.username, config.password or "")
    return NoAuth()
