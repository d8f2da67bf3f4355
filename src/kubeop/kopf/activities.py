"""Operator-level handlers: ``on.startup``, ``on.cleanup``, ``on.login`` and ``on.probe``.

They belong to the operator, not to an object. Startup handlers run before anything is watched
(the operator does not start if one fails for good), cleanup handlers after everything stopped,
login handlers at start and again whenever the API server rejects their credentials or they
expire (their :class:`ConnectionInfo` results feed kubeop's client through
:class:`kubeop.kopf.credentials.Vault`; without login handlers kubeop's own configuration is
used: ``$KUBECONFIG``, ``~/.kube/config``, the in-cluster service account, which renews token
files and exec credentials itself), and probe handlers from the liveness endpoint. Retries
are kopf's: ``TemporaryError(delay=)`` waits that long, another exception waits ``backoff``
(or ``settings.execution.default_backoff``) unless ``errors=ErrorsMode.PERMANENT``/``IGNORED``,
and ``retries=``/``timeout=`` bound them.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import enum
import inspect
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from kubeop.client import ClientConfig
from kubeop.client.config import REDACTED, redact_url
from kubeop.kopf.errors import PermanentError, TemporaryError
from kubeop.kopf.handlers import ErrorsMode
from kubeop.kopf.settings import default_backoff

__all__ = [
    "Activity",
    "ActivityError",
    "ActivityHandler",
    "AiohttpSession",
    "ConnectionInfo",
    "LoginError",
    "client_config",
    "run_activity",
]

# How these kopf names behave on kubeop where it is not as in kopf (read by scripts/kopf_compat.py
# into the compatibility table of docs/migration/from-kopf.md; a name not listed behaves as kopf's).
_UNSUPPORTED = {
    "AiohttpSession": "return a `kopf.ConnectionInfo` from the login handler (kubeop talks to the API "
    "server with its own HTTP client, not aiohttp).",
}


class Activity(enum.Enum):
    STARTUP = "startup"
    CLEANUP = "cleanup"
    AUTHENTICATION = "authentication"
    PROBE = "probe"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ActivityHandler:
    fn: Callable[..., Any]
    id: str
    activity: Activity
    errors: ErrorsMode = ErrorsMode.TEMPORARY
    timeout: float | None = None
    retries: int | None = None
    backoff: float | None = None
    param: Any = None

    def __str__(self) -> str:
        return f"Activity {self.id!r}"


class ActivityError(Exception):
    """One or more handlers of an activity failed for good (the operator does not start/stop well)."""

    def __init__(self, msg: str, *, outcomes: Mapping[str, BaseException]) -> None:
        super().__init__(msg)
        self.outcomes = dict(outcomes)


class AiohttpSession:
    """kopf's login result carrying a ready ``aiohttp`` session; kubeop talks to the API server
    with its own HTTP client, so making one is an error naming what to return instead."""

    def __init__(self, *_: Any, **__: Any) -> None:
        raise TypeError(
            "kopf.AiohttpSession is not supported by kubeop.kopf (kubeop uses its own HTTP client, "
            "not aiohttp): return kopf.ConnectionInfo(server=..., token=... or certificate_path=...) "
            "from the login handler, or a kubeop.client.ClientConfig"
        )


class LoginError(Exception):
    """No login handler returned credentials."""


@dataclass(frozen=True, kw_only=True, repr=False)
class ConnectionInfo:
    """kopf's ``ConnectionInfo``, the return value of a login handler; kubeop builds its client
    configuration from it (:func:`client_config`).

    ``repr()`` and ``str()`` never show a secret: ``token``, ``password`` and
    ``private_key_data`` read ``<redacted>`` when set, a ``scheme`` only its first word if that
    looks like an auth scheme (kopf sends a scheme without a token as the whole Authorization
    header), URLs lose their user information, and certificate data shows its length.
    """

    server: str
    ca_path: str | None = None
    ca_data: str | bytes | None = None
    insecure: bool | None = None
    username: str | None = None
    password: str | None = None
    scheme: str | None = None
    token: str | None = None
    certificate_path: str | None = None
    certificate_data: str | bytes | None = None
    private_key_path: str | None = None
    private_key_data: str | bytes | None = None
    default_namespace: str | None = None
    proxy_url: str | None = None
    trust_env: bool = False
    priority: int = 0
    expiration: dt.datetime | None = None

    def __post_init__(self) -> None:
        for what in ("ca", "certificate", "private_key"):
            if getattr(self, f"{what}_path") and getattr(self, f"{what}_data"):
                raise ValueError(f"ConnectionInfo: give {what}_path or {what}_data, not both")

    def __repr__(self) -> str:
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            text = repr(value) if value is None or f.name not in _SHOWN_AS else _SHOWN_AS[f.name](value)
            parts.append(f"{f.name}={text}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _scheme(value: object) -> str:
    """An auth-scheme word (``Bearer``) as it is; anything after it, or a word that does not look
    like a scheme (a credential given as the scheme), redacted."""
    word, *rest = str(value).split(None, 1) or [""]
    shown = word if _SCHEME.fullmatch(word) else REDACTED
    return repr(f"{shown} {REDACTED}" if rest else shown)


def _length(value: object) -> str:
    return (
        f"<{len(value)} {'bytes' if isinstance(value, bytes) else 'characters'}>"
        if isinstance(value, str | bytes)
        else REDACTED
    )


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,19}")
# How ConnectionInfo's repr shows the fields that may hold secrets (all others: their repr).
_SHOWN_AS: dict[str, Callable[[Any], str]] = {
    "server": lambda v: repr(redact_url(str(v))),
    "proxy_url": lambda v: repr(redact_url(str(v))),
    "password": lambda _: REDACTED,
    "token": lambda _: REDACTED,
    "private_key_data": lambda _: REDACTED,
    "scheme": _scheme,
    "ca_data": _length,
    "certificate_data": _length,
}


def _pem(data: str | bytes | None) -> bytes | None:
    """PEM as given, or base64 of PEM (kubeconfig's ``*-data`` fields), as bytes."""
    if data is None:
        return None
    raw = data.encode() if isinstance(data, str) else data
    if raw.lstrip().startswith(b"-----"):
        return raw
    return base64.b64decode(raw)


def client_config(info: ConnectionInfo) -> ClientConfig:
    """kubeop's client configuration for a login handler's credentials."""
    return ClientConfig(
        server=info.server,
        namespace=info.default_namespace or "default",
        ca_file=info.ca_path,
        ca_data=_pem(info.ca_data),
        insecure_skip_tls_verify=bool(info.insecure),
        client_cert_file=info.certificate_path,
        client_cert_data=_pem(info.certificate_data),
        client_key_file=info.private_key_path,
        client_key_data=_pem(info.private_key_data),
        token=info.token,
        username=info.username,
        password=info.password,
        proxy_url=info.proxy_url,
        qps=None,
        source="a kopf login handler",
    )


async def _call(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    if inspect.iscoroutinefunction(fn):
        return await fn(**kwargs)
    return await asyncio.to_thread(fn, **kwargs)


async def run_activity(
    handlers: list[ActivityHandler],
    activity: Activity,
    *,
    logger: logging.Logger,
    kwargs: Mapping[str, Any],
    stop: asyncio.Event | None = None,
) -> dict[str, Any]:
    """Run every handler of one activity until each succeeded or failed for good (kopf's
    retries); their results by handler id. Raises :class:`ActivityError` if any failed."""
    started = {h.id: time.time() for h in handlers}
    retries = dict.fromkeys(started, 0)
    due = dict.fromkeys(started, 0.0)
    results: dict[str, Any] = {}
    failures: dict[str, BaseException] = {}
    pending = list(handlers)
    while pending:
        now = time.monotonic()
        for h in [h for h in pending if due[h.id] <= now]:
            runtime = time.time() - started[h.id]
            call = dict(
                kwargs,
                retry=retries[h.id],
                started=dt.datetime.fromtimestamp(started[h.id], dt.UTC),
                runtime=dt.timedelta(seconds=runtime),
                param=h.param,
                activity=activity.value,
            )
            delay: float | None = None
            try:
                logger.debug("%s is invoked.", h)
                if h.timeout is not None and runtime >= h.timeout:
                    raise PermanentError(f"{h} has timed out after {runtime:.1f} s.")
                if h.retries is not None and retries[h.id] >= h.retries:
                    raise PermanentError(f"{h} has exceeded {retries[h.id]} retries.")
                results[h.id] = await _call(h.fn, call)
            except asyncio.CancelledError:
                raise
            except TemporaryError as exc:
                logger.error("%s failed temporarily: %s", h, str(exc) or repr(exc))
                delay = exc.delay or 0.0
            except PermanentError as exc:
                logger.error("%s failed permanently: %s", h, str(exc) or repr(exc))
                failures[h.id] = exc
            except Exception as exc:
                if h.errors is ErrorsMode.IGNORED:
                    logger.exception("%s failed with an exception and will ignore it: %s", h, exc)
                    results[h.id] = None
                elif h.errors is ErrorsMode.PERMANENT:
                    logger.exception("%s failed with an exception and will stop now: %s", h, exc)
                    failures[h.id] = exc
                else:
                    delay = default_backoff(h.backoff)
                    logger.exception(
                        "%s failed with an exception and will try again in %s seconds: %s", h, delay, exc
                    )
            else:
                logger.info("%s succeeded.", h)
            if delay is None:
                pending.remove(h)
            else:
                retries[h.id] += 1
                due[h.id] = time.monotonic() + delay
        if pending:
            wait = max(0.0, min(due[h.id] for h in pending) - time.monotonic())
            if stop is None:
                await asyncio.sleep(wait)
            else:
                try:
                    await asyncio.wait_for(stop.wait(), wait)
                except TimeoutError:
                    pass
                else:
                    raise ActivityError(
                        f"{activity.value.capitalize()} is interrupted by the stop.", outcomes={}
                    )
    if failures:
        raise ActivityError(
            f"One or more {activity.value} handlers failed: {', '.join(failures)}", outcomes=failures
        )
    return results
