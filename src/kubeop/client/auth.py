"""Request authentication: static tokens, rotating token files, basic auth and exec plugins.

Every authenticator answers two questions: :meth:`Auth.credentials` (the headers, and possibly a
client certificate, to use now; cheap, cached) and :meth:`Auth.refresh` (called after a 401: get
fresh credentials if that could help, and say whether a retry is worth it). The transport retries
a request once after a successful refresh, which is how expired exec tokens and rotated
service-account tokens recover without the caller noticing.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import orjson

from kubeop.client.config import ClientConfig, ConfigError, ExecConfig

__all__ = [
    "Auth",
    "BasicAuth",
    "Credentials",
    "ExecAuth",
    "NoAuth",
    "StaticToken",
    "TokenFile",
    "auth_for",
]

Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Credentials:
    """What to attach to requests: extra headers and, from exec plugins, a client cert/key (PEM)."""

    headers: dict[str, str] = field(default_factory=dict)
    client_cert: tuple[bytes, bytes] | None = None


class Auth(Protocol):
    async def credentials(self) -> Credentials: ...

    async def refresh(self) -> bool:
        """After a 401: renew what can be renewed; True if retrying the request may now succeed."""
        ...


class NoAuth:
    async def credentials(self) -> Credentials:
        return Credentials()

    async def refresh(self) -> bool:
        return False


class StaticToken:
    def __init__(self, token: str) -> None:
        self._creds = Credentials({"Authorization": f"Bearer {token}"})

    async def credentials(self) -> Credentials:
        return self._creds

    async def refresh(self) -> bool:
        return False


class BasicAuth:
    def __init__(self, username: str, password: str) -> None:
        raw = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        self._creds = Credentials({"Authorization": f"Basic {raw}"})

    async def credentials(self) -> Credentials:
        return self._creds

    async def refresh(self) -> bool:
        return False


class TokenFile:
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
        return Credentials({"Authorization": f"Bearer {token}"})

    async def credentials(self) -> Credentials:
        if self._creds is None or self._clock() - self._read_at >= self.reload_after:
            self._creds = self._read()
        return self._creds

    async def refresh(self) -> bool:
        old = self._creds
        self._creds = self._read()
        return self._creds != old


class ExecAuth:
    """Credentials from an exec plugin (client.authentication.k8s.io v1 or v1beta1).

    The plugin's answer is cached until its ``expirationTimestamp`` (forever if it has none) and
    re-run after a 401. Concurrent callers share one run of the plugin.
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

    async def credentials(self) -> Credentials:
        if self._valid():
            assert self._creds is not None
            return self._creds
        async with self._lock:
            if not self._valid():
                await self._run()
        assert self._creds is not None
        return self._creds

    async def refresh(self) -> bool:
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
        try:
            proc = await asyncio.create_subprocess_exec(
                spec.command,
                *spec.args,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except (FileNotFoundError, PermissionError) as e:
            hint = f"; {spec.install_hint.strip()}" if spec.install_hint else ""
            raise ConfigError(f"{what} cannot be started: {e.strerror}{hint}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise ConfigError(f"{what} did not answer within {self.timeout:.0f} s") from None
        self.runs += 1
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip()[-500:]
            raise ConfigError(f"{what} exited with status {proc.returncode}: {tail or '(no output)'}")
        self._creds, self._expires_at = self._parse(out, what)

    def _parse(self, out: bytes, what: str) -> tuple[Credentials, float | None]:
        try:
            doc = orjson.loads(out)
        except orjson.JSONDecodeError:
            raise ConfigError(f"{what} printed something that is not JSON: {out[:200]!r}") from None
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise ConfigError(f"{what} did not print an ExecCredential")
        if doc.get("apiVersion") != self.spec.api_version:
            raise ConfigError(
                f"{what} answered apiVersion {doc.get('apiVersion')!r}, expected {self.spec.api_version!r}"
            )
        status = doc.get("status") or {}
        token = status.get("token")
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if bool(cert) != bool(key):
            raise ConfigError(f"{what} returned only one of clientCertificateData / clientKeyData")
        if not token and not cert:
            raise ConfigError(f"{what} returned neither a token nor a client certificate")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        pair = (str(cert).encode(), str(key).encode()) if cert and key else None
        expires_at: float | None = None
        stamp = status.get("expirationTimestamp")
        if stamp:
            try:
                expires_at = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
            except ValueError:
                raise ConfigError(f"{what} returned a malformed expirationTimestamp {stamp!r}") from None
        return Credentials(headers, pair), expires_at


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
