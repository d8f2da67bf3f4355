"""kopf's credentials vault: the login handlers' :class:`~kubeop.kopf.ConnectionInfo`, renewed.

The credentials that ``@kopf.on.login`` handlers return are kept by handler id; kubeop's client
sends each request with the one of the highest ``priority`` (the first such handler's). When the
API server answers 401 to it, it is dropped and remembered as invalid (the last three per
handler), the next one is used, and once none is left the login handlers run again (logged as
kopf logs it: "Re-authentication has been initiated." / "... has finished.") and the request is
retried with what they return; requests that failed meanwhile wait for that one re-login and
retry too. Credentials whose ``expiration`` has passed are dropped before a request is sent (not
remembered as invalid), with a re-login once none is left. A re-login that brings nothing new
(no credentials, or only those already rejected) fails the request with :class:`LoginError`;
the next request tries the login handlers again.

kubeop's client has one server and TLS setup: the first credentials choose the server, CA and
proxy; later credentials for another server are refused with a warning naming the handler.
Tokens (any ``scheme``), basic auth and client certificates (paths or data) all renew.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from kubeop.client import Client, ClientConfig, HttpTransport
from kubeop.client.auth import Credentials, SharedRefresh
from kubeop.client.config import redact_url
from kubeop.kopf.activities import ConnectionInfo, LoginError, client_config

__all__ = ["Vault", "connect"]

Login = Callable[[], Awaitable[Mapping[str, ConnectionInfo]]]
"""Runs the login handlers: their credentials by handler id."""

log = logging.getLogger("kubeop.kopf.activities.authentication")

_INVALID_KEPT = 3  # rejected credentials remembered per handler (kopf keeps three)


def _endpoint(info: ConnectionInfo) -> tuple[object, ...]:
    """What one client cannot change: the server and how its TLS is set up."""
    return (info.server, info.ca_path, info.ca_data, bool(info.insecure), info.proxy_url)


def _expiry(info: ConnectionInfo) -> float | None:
    if info.expiration is None:
        return None
    when = info.expiration if info.expiration.tzinfo else info.expiration.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _pem(data: str | bytes | None, path: str | None, what: str, key: str) -> bytes | None:
    if path:
        try:
            return Path(path).read_bytes()
        except OSError as exc:
            raise LoginError(f"login handler {key!r}: cannot read {what} {path}: {exc.strerror}") from None
    if data is None:
        return None
    raw = data.encode() if isinstance(data, str) else data
    return raw if raw.lstrip().startswith(b"-----") else base64.b64decode(raw)


def _headers(info: ConnectionInfo) -> dict[str, str]:
    """The Authorization header as kopf builds it: basic auth, else scheme and token."""
    if info.username and info.password:
        pair = base64.b64encode(f"{info.username}:{info.password}".encode()).decode("ascii")
        return {"Authorization": f"Basic {pair}"}
    if info.scheme and info.token:
        return {"Authorization": f"{info.scheme} {info.token}"}
    if info.scheme:
        return {"Authorization": info.scheme}
    if info.token:
        return {"Authorization": f"Bearer {info.token}"}
    return {}


class Vault(SharedRefresh):
    """The login handlers' credentials for kubeop's client (an :class:`~kubeop.client.Auth`)."""

    def __init__(self, login: Login, *, clock: Callable[[], float] = time.time) -> None:
        self._login = login
        self._clock = clock
        self._current: dict[str, ConnectionInfo] = {}
        self._invalid: dict[str, list[ConnectionInfo]] = {}
        self._endpoint: tuple[object, ...] | None = None
        self._selected: tuple[str, ConnectionInfo, Credentials] | None = None
        self._next_expiry: float | None = None
        self._lock = asyncio.Lock()
        self.logins = 0
        """How many times the login handlers ran."""

    def __repr__(self) -> str:
        return f"Vault(credentials={sorted(self._current)!r}, logins={self.logins})"

    @property
    def info(self) -> ConnectionInfo:
        """The credentials in use (logs in first if needed: ``await vault.credentials()``)."""
        if self._selected is None:
            raise LoginError("no credentials yet: the login handlers have not run")
        return self._selected[1]

    # -- the client's side ------------------------------------------------------------------------

    async def credentials(self) -> Credentials:
        selected = self._selected
        if selected is not None and (self._next_expiry is None or self._clock() < self._next_expiry):
            return selected[2]
        async with self._lock:
            self._expire()
            if not self._current:
                await self._relogin("Initial authentication" if self.logins == 0 else "Re-authentication")
            return self._select()

    async def refresh(self) -> bool:
        """After a 401 for the credentials in use (concurrent 401s share one call): drop them,
        use the next ones, logging in again once none is left."""
        async with self._lock:
            if self._selected is not None:
                key, info, _ = self._selected
                if self._current.get(key) is info:
                    del self._current[key]
                    self._invalid[key] = [*self._invalid.get(key, [])[-(_INVALID_KEPT - 1) :], info]
                    log.info("The API server rejected the credentials of %r (HTTP 401).", key)
                self._selected = None
            self._expire()
            if not self._current:
                await self._relogin("Re-authentication")
            self._select()
            return True

    # -- keeping them -----------------------------------------------------------------------------

    async def _relogin(self, title: str) -> None:
        log.info("%s has been initiated.", title)
        self.logins += 1
        found = await self._login()
        self.populate(found)
        if not self._current:
            log.warning("%s has failed: no credentials were retrieved from the login handlers.", title)
            rejected = " (the ones they returned were already rejected with 401)" if found else ""
            raise LoginError(
                "Ran out of valid credentials: the login handlers returned none"
                f"{rejected}; return a kopf.ConnectionInfo with a token or certificate that the "
                "API server accepts from an @kopf.on.login handler"
            )
        log.info("%s has finished.", title)

    def populate(self, found: Mapping[str, ConnectionInfo]) -> None:
        """Add credentials by handler id, except those already rejected with 401 or for
        another server than the client's."""
        for key, info in found.items():
            if not isinstance(info, ConnectionInfo):
                raise LoginError(
                    f"login handler {key!r} returned {type(info).__name__}; return a kopf.ConnectionInfo"
                )
            if info in self._invalid.get(key, ()):
                continue
            if self._endpoint is not None and _endpoint(info) != self._endpoint:
                log.warning(
                    "Login handler %r returned credentials for %s; kubeop's client stays on %s "
                    "(restart the operator to move): ignored.",
                    key,
                    redact_url(str(info.server)),
                    redact_url(str(self._endpoint[0])),
                )
                continue
            self._current[key] = info
        if self._endpoint is None and self._current:
            # The first login fixes the client's server (the highest priority's): credentials
            # for any other server must never be sent to it, even after the first are rejected.
            top = max(self._current.values(), key=lambda i: i.priority)
            self._endpoint = _endpoint(top)
            for key, info in list(self._current.items()):
                if _endpoint(info) != self._endpoint:
                    log.warning(
                        "Login handler %r returned credentials for %s; kubeop's client uses %s "
                        "(the highest priority's): ignored.",
                        key,
                        redact_url(str(info.server)),
                        redact_url(str(self._endpoint[0])),
                    )
                    del self._current[key]
        self._update_expiry()

    def _expire(self) -> None:
        if self._next_expiry is None or self._clock() < self._next_expiry:
            return
        now = self._clock()
        for key, info in list(self._current.items()):
            expiry = _expiry(info)
            if expiry is not None and now >= expiry:
                log.debug("The credentials of %r have expired.", key)
                del self._current[key]
        self._update_expiry()

    def _update_expiry(self) -> None:
        expiries = [e for e in map(_expiry, self._current.values()) if e is not None]
        self._next_expiry = min(expiries) if expiries else None

    def _select(self) -> Credentials:
        top = max(info.priority for info in self._current.values())
        key, info = next((k, i) for k, i in self._current.items() if i.priority == top)
        if self._selected is not None and self._selected[1] is info:
            return self._selected[2]
        cert = _pem(info.certificate_data, info.certificate_path, "certificate", key)
        pkey = _pem(info.private_key_data, info.private_key_path, "private key", key)
        if (cert is None) != (pkey is None):
            raise LoginError(
                f"login handler {key!r}: a client certificate and its private key go together: give both"
            )
        self.generation += 1
        creds = Credentials(
            _headers(info),
            (cert, pkey) if cert is not None and pkey is not None else None,
            generation=self.generation,
        )
        self._selected = (key, info, creds)
        self._endpoint = self._endpoint or _endpoint(info)
        return creds


async def connect(vault: Vault) -> Client:
    """Log in (the first run of the login handlers) and a client whose requests use the vault."""
    await vault.credentials()
    config: ClientConfig = dataclasses.replace(
        client_config(vault.info),
        token=None,
        username=None,
        password=None,
        client_cert_file=None,
        client_cert_data=None,
        client_key_file=None,
        client_key_data=None,
    )
    return Client(transport=HttpTransport(config, auth=vault))
