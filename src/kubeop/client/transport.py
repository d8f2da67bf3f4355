"""Transports: the seam between :class:`~kubeop.client.Client` and an API server.

:class:`Transport` is what a client needs of one (send a request, stream a watch, probe health,
close); :class:`HttpTransport` talks HTTP to a real server, and
:class:`kubeop.testing.FakeCluster` answers in process for unit tests.

HTTP transport: one connection pool per client (:mod:`kubeop.client.http`), JSON decoded once.
It sends :class:`~kubeop.core.request.ApiRequest` values built by kubeop.core and
returns plain decoded JSON. It owns everything that is about the connection rather than the API:
TLS (built once), keep-alive pooling, authentication headers and refresh on 401, the client-side
rate limit, retries (see :mod:`kubeop.client.retry`) and turning failures into typed errors:
:class:`~kubeop.core.errors.ApiError` subclasses for answers from the server, and
:class:`ApiConnectionError` when no answer came (unreachable server, TLS failure, timeout), with
the server URL and config source in the message rather than a traceback from the HTTP layer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import replace
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit

import orjson

from kubeop.client.auth import Auth, Credentials, auth_for, refresh_after_unauthorized
from kubeop.client.config import ClientConfig
from kubeop.client.http import ConnectError, HttpError, Pool, Response
from kubeop.client.liststream import ListDecoder
from kubeop.client.proxy import proxy_for
from kubeop.client.ratelimit import TokenBucket
from kubeop.client.retry import RetryPolicy, parse_retry_after
from kubeop.client.tls import ssl_context
from kubeop.client.watch import WatchEvent, decode_event, split_lines
from kubeop.core.errors import ApiError, Unauthorized, error_from_response
from kubeop.core.request import ApiRequest

__all__ = ["ApiConnectionError", "HttpTransport", "ListPart", "Observer", "Transport"]

log = logging.getLogger("kubeop.client")

# Watches stay open for minutes; without a read deadline a half-dead TCP connection would leave a
# zombie watch forever (TCP keepalive notices a vanished peer, not a live one that stopped talking).
# The server closes a watch at timeoutSeconds; allow this much on top.
_WATCH_GRACE = 60.0
# A watch without timeoutSeconds is closed by the server within twice its --min-request-timeout
# (1800 s by default); past that, nothing more is coming on it.
_WATCH_DEFAULT_DEADLINE = 3600.0
# A connection pool replaced because the client certificate changed is closed this long after, so
# requests and watches still running on it can finish.
_RETIRED_POOL_GRACE = 300.0


class ApiConnectionError(ConnectionError):
    """No HTTP answer from the API server: refused, unreachable, TLS failure or timeout."""

    def __init__(self, message: str, *, request: str = "") -> None:
        self.request = request
        super().__init__(f"{message} ({request})" if request else message)


class ListPart(NamedTuple):
    """Part of a list response read as it arrives (:meth:`Transport.stream_list`): ``head`` is
    the document without its items (``metadata`` with resourceVersion and continue; the same dict
    in every part, completed by the last), ``items`` the items decoded since the previous part."""

    head: dict[str, Any]
    items: list[dict[str, Any]]


Observer = Callable[[str, str, float], None]
"""Called with (method, status code or ``"<error>"``, seconds until the response headers)."""


class Transport(Protocol):
    """What a :class:`~kubeop.client.Client` needs of the way to its API server.

    ``request`` sends one :class:`~kubeop.core.request.ApiRequest` and returns the decoded JSON body
    (``None`` for an empty one), raising :class:`~kubeop.core.errors.ApiError` subclasses for
    error answers; ``stream`` sends a watch and yields its events, raising the typed error of an
    ERROR event (``Gone`` for an expired resourceVersion); ``stream_list`` sends a list and
    yields its items in :class:`ListPart` s as they arrive; ``probe`` is one health check's HTTP
    status; ``observer``, when set, sees every request (the manager's rest_client metrics).
    """

    observer: Observer | None

    @property
    def config(self) -> ClientConfig:
        """The configuration the transport was made from (server, TLS, rate limits)."""

    async def request(self, req: ApiRequest) -> Any:
        """Send one request and return its decoded JSON body (``None`` when empty); raise the matching
        :class:`~kubeop.core.errors.ApiError` for an error answer.
        """

    def stream(self, req: ApiRequest) -> AsyncGenerator[WatchEvent[dict[str, Any]], None]:
        """Send a watch and yield its events; an ERROR event raises its typed error (``Gone`` for an expired
        resourceVersion).
        """

    def stream_list(self, req: ApiRequest) -> AsyncGenerator[ListPart, None]:
        """Send a list and yield its items in parts as they arrive."""

    async def probe(self, path: str = "/readyz", *, time_limit: float = 2.0) -> int:
        """One health check of ``path``: its HTTP status, within ``time_limit`` seconds."""

    async def close(self) -> None:
        """Close the transport's connections."""


class HttpTransport:
    """Sends requests to one API server. Create inside a running event loop; ``await close()``.

    Safe for any number of concurrent requests on one loop: they share the connection pool
    (``config.max_connections``) and the token bucket.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        auth: Auth | None = None,
        retry: RetryPolicy | None = None,
        limiter: TokenBucket | None = None,
    ) -> None:
        self.config = config
        self.auth = auth if auth is not None else auth_for(config)
        self.retry = retry if retry is not None else RetryPolicy(max_attempts=max(1, config.max_retries + 1))
        if limiter is None and config.qps is not None:
            limiter = TokenBucket(config.qps, config.burst)
        self.limiter = limiter
        self._base = config.server.rstrip("/")
        self._prefix = urlsplit(self._base).path  # a server URL may have a path: /prefix/api/v1/...
        # Chosen once, as Go does: proxy-url, else HTTPS_PROXY/HTTP_PROXY unless NO_PROXY or loopback.
        self._proxy = proxy_for(config, os.environ)
        if self._proxy is not None:
            log.debug("requests to %s go through %s", self._base, self._proxy)
        self._session: Pool | None = None
        self._session_cert: tuple[bytes, bytes] | None = None
        self._retired: set[Pool] = set()
        self._retiring: set[asyncio.Task[None]] = set()
        self._warned: set[str] = set()
        self._closed = False
        self._headers = {
            "Accept": "application/json",
            "User-Agent": config.user_agent,
            "Accept-Encoding": "gzip" if config.compression else "identity",
        }
        self._headers.update(dict(config.extra_headers))
        self._header_items = tuple(self._headers.items())
        self.observer: Observer | None = None
        """Called with (method, status code or ``"<error>"``, seconds until the response headers)
        for every attempt; the manager exports it as ``rest_client_requests_total`` and
        ``rest_client_request_duration_seconds``. Watches count their start only."""

    # -- connection pool ------------------------------------------------------------------------

    def _new_session(self, client_cert: tuple[bytes, bytes] | None) -> Pool:
        tls: ssl.SSLContext | None = None
        if self._base.startswith("https://"):
            tls = ssl_context(self.config, client_cert)
        return Pool(
            self._base,
            ssl_context=tls,
            server_hostname=self.config.tls_server_name,
            max_connections=self.config.max_connections,
            connect_timeout=self.config.connect_timeout,
            proxy_url=self._proxy.url if self._proxy is not None else None,
        )

    async def _prepare(self) -> tuple[Pool, Credentials]:
        if self._closed:
            raise RuntimeError("the client is closed")
        creds = await self.auth.credentials()
        if self._session is None or creds.client_cert != self._session_cert:
            # First use, or an exec plugin handed out a new client certificate: TLS identity is
            # per connection, so the pool is replaced (old connections finish and close later).
            if self._session is not None:
                self._retire(self._session)
            self._session = self._new_session(creds.client_cert)
            self._session_cert = creds.client_cert
        return self._session, creds

    def _retire(self, session: Pool) -> None:
        self._retired.add(session)

        async def close_later() -> None:
            await asyncio.sleep(_RETIRED_POOL_GRACE)
            self._retired.discard(session)
            await session.close()

        task = asyncio.get_running_loop().create_task(close_later())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def close(self) -> None:
        """Close every connection, waiting for the ones being retired; later requests fail."""
        self._closed = True
        tasks = list(self._retiring)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        sessions = [*self._retired, *([self._session] if self._session else [])]
        self._session = None
        self._retired.clear()
        for session in sessions:
            await session.close()

    # -- sending --------------------------------------------------------------------------------

    def _headers_for(self, req: ApiRequest, creds: Credentials) -> tuple[tuple[str, str], ...]:
        if not creds.headers and not req.content_type and not req.accept:
            return self._header_items
        headers = dict(self._headers)
        headers.update(creds.headers)
        if req.content_type:
            headers["Content-Type"] = req.content_type
        if req.accept:
            headers["Accept"] = req.accept
        return tuple(headers.items())

    async def _send(self, req: ApiRequest, *, deadline: float | None = None) -> Response:
        """Send with rate limit, auth refresh and retries; returns a response with status < 400.

        A normal request's response has its body read; a stream's is open and the caller
        closes it. Error responses are read, decoded and raised here.
        """
        attempt = 0
        auth_retries = 0
        target = self._prefix + req.url
        if req.stream and deadline is None:
            seconds = dict(req.query).get("timeoutSeconds")
            deadline = (float(seconds) if seconds else _WATCH_DEFAULT_DEADLINE) + _WATCH_GRACE
        while True:
            attempt += 1
            if self.limiter is not None:
                await self.limiter.acquire()
            pool, creds = await self._prepare()
            started = time.perf_counter()
            try:
                resp = await pool.request(
                    req.method,
                    target,
                    self._headers_for(req, creds),
                    req.body,
                    stream=req.stream,
                    idempotent=req.idempotent,
                    timeout=self.config.request_timeout,
                    stream_deadline=deadline,
                )
            except (HttpError, TimeoutError) as e:
                if self.observer is not None:
                    self.observer(req.method, "<error>", time.perf_counter() - started)
                if self.retry.should_retry(attempt, status=None, idempotent=req.idempotent):
                    await asyncio.sleep(self.retry.delay(attempt))
                    continue
                raise self._connection_error(e, req) from None
            status = resp.status
            if self.observer is not None:
                self.observer(req.method, str(status), time.perf_counter() - started)
            if status < 400:
                warning = resp.headers.get("warning")
                if warning and warning not in self._warned:
                    # Deprecation warnings repeat on every request; say each one once per client.
                    self._warned.add(warning)
                    log.warning("API server warning on %s: %s", req, warning)
                return resp
            if req.stream:
                try:
                    body = await resp.read()
                except (HttpError, TimeoutError) as e:
                    raise self._connection_error(e, req) from None
            else:
                body = resp.body
            retry_after = parse_retry_after(resp.headers.get("retry-after"))
            # 401: the credentials this request used are rejected. Concurrent 401s share one
            # refresh; a request whose credentials were replaced meanwhile just retries with the
            # new ones. Twice at most: once with someone else's refresh, once with its own.
            if status == 401 and auth_retries < 2:
                auth_retries += 1
                if await refresh_after_unauthorized(self.auth, creds):
                    attempt -= 1  # a credential refresh is not a retry
                    continue
            if self.retry.should_retry(attempt, status=status, idempotent=req.idempotent):
                await asyncio.sleep(self.retry.delay(attempt, retry_after))
                continue
            raise self._api_error(status, body, retry_after, req)

    def _api_error(self, status: int, body: bytes, retry_after: float | None, req: ApiRequest) -> ApiError:
        decoded: Any = body
        if body[:1] == b"{":
            try:
                decoded = orjson.loads(body)
            except orjson.JSONDecodeError:
                decoded = body
        err = error_from_response(
            status, decoded, retry_after=retry_after, request=str(req), target=req.target
        )
        if isinstance(err, Unauthorized):
            err.message = f"{err.message} [credentials from {self.config.source}]"
        return err

    def _connection_error(self, e: BaseException, req: ApiRequest) -> ApiConnectionError:
        where = f"API server {self._base} ({self.config.source})"
        if self._proxy is not None:
            where = f"{where} through {self._proxy}"
        if isinstance(e, ConnectError):
            cause = e.cause
            if isinstance(cause, ssl.SSLCertVerificationError):
                msg = f"TLS verification of {where} failed: {cause}"
            elif isinstance(cause, ssl.SSLError):
                msg = f"TLS handshake with {where} failed: {cause}"
            else:
                msg = f"cannot connect to {where}: {cause.strerror or cause}"
        elif isinstance(e, TimeoutError):
            msg = f"timed out talking to {where}"
        else:
            msg = f"connection to {where} failed: {e}"
        return ApiConnectionError(msg, request=str(req))

    async def request(self, req: ApiRequest) -> Any:
        """Send ``req`` and return the decoded JSON body (``None`` for an empty body)."""
        body = (await self._send(req)).body
        if not body:
            return None
        return orjson.loads(body)

    async def probe(self, path: str = "/readyz", *, time_limit: float = 2.0) -> int:
        """One GET of ``path`` and its HTTP status: no retries, no client-side rate limit.

        For health checks, such as the informers asking "is the server back?" while they back off:
        a retried request would hide exactly the moment the server returns, and the rate limiter
        would queue a probe behind the traffic it is meant to precede. Raises
        :class:`ApiConnectionError` when no answer came within ``time_limit`` seconds.
        """
        pool, creds = await self._prepare()
        req = ApiRequest("GET", path, target=f"health check {path}")
        try:
            async with asyncio.timeout(time_limit):
                resp = await pool.request(
                    "GET", self._prefix + path, self._headers_for(req, creds), idempotent=True
                )
        except (HttpError, TimeoutError) as e:
            raise self._connection_error(e, req) from None
        return resp.status

    async def stream_list(self, req: ApiRequest) -> AsyncGenerator[ListPart, None]:
        """Send a list request and yield its items as they arrive (:mod:`kubeop.client.liststream`),
        so a large list is decoded and used while the rest is still on the wire.

        Every part has the head (resourceVersion and continue, which the server writes before
        the items); the last one carries what remained. The whole exchange has the client's
        request timeout, as ``request``.
        """
        req = replace(req, stream=True)
        resp = await self._send(req, deadline=self.config.request_timeout)
        decoder = ListDecoder()
        try:
            async for chunk in resp.chunks():
                items = decoder.feed(chunk)
                if items:
                    yield ListPart(decoder.head or {}, items)
            try:
                items = decoder.finish()
            except ValueError as e:  # orjson.JSONDecodeError is one
                where = req.target or "the server"
                raise ApiError(f"malformed list response from {where}: {e}", request=str(req)) from None
            yield ListPart(decoder.head or {}, items)
        except (HttpError, TimeoutError) as e:
            raise self._connection_error(e, req) from None
        finally:
            resp.close()

    async def stream(self, req: ApiRequest) -> AsyncGenerator[WatchEvent[dict[str, Any]], None]:
        """Send a watch request and yield its events as they arrive.

        Ends when the server closes the stream (timeoutSeconds); raises the typed error of an
        ERROR event (``Gone`` for an expired resourceVersion). Closing the iterator (``break``,
        cancellation) closes the connection.
        """
        resp = await self._send(req)
        text = str(req)
        try:
            async for line in split_lines(resp.chunks()):
                yield decode_event(line, request=text, target=req.target)
        except (HttpError, TimeoutError) as e:
            raise self._connection_error(e, req) from None
        finally:
            resp.close()
