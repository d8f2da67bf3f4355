"""HTTP transport on aiohttp: one session and connection pool per client, JSON decoded once.

The transport sends :class:`~kubeop.core.request.Request` values built by kubeop.core and
returns plain decoded JSON. It owns everything that is about the connection rather than the API:
TLS (built once), keep-alive pooling, authentication headers and refresh on 401, the client-side
rate limit, retries (see :mod:`kubeop.client.retry`) and turning failures into typed errors:
:class:`~kubeop.core.errors.ApiError` subclasses for answers from the server, and
:class:`ApiConnectionError` when no answer came (unreachable server, TLS failure, timeout), with
the server URL and config source in the message rather than a traceback from inside aiohttp.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

import aiohttp
import orjson
from yarl import URL

from kubeop.client.auth import Auth, Credentials, auth_for
from kubeop.client.config import ClientConfig
from kubeop.client.ratelimit import TokenBucket
from kubeop.client.retry import RetryPolicy, parse_retry_after
from kubeop.client.tls import ssl_context
from kubeop.client.watch import WatchEvent, decode_event, split_lines
from kubeop.core.errors import ApiError, Unauthorized, error_from_response
from kubeop.core.request import Request

__all__ = ["ApiConnectionError", "Transport"]

log = logging.getLogger("kubeop.client")

# Watches stay open for minutes; without a read deadline a half-dead TCP connection would leave a
# zombie watch forever. The server closes a watch at timeoutSeconds; allow this much on top.
_WATCH_GRACE = 60.0
# A connection pool replaced because the client certificate changed is closed this long after, so
# requests and watches still running on it can finish.
_RETIRED_POOL_GRACE = 300.0


class ApiConnectionError(ConnectionError):
    """No HTTP answer from the API server: refused, unreachable, TLS failure or timeout."""

    def __init__(self, message: str, *, request: str = "") -> None:
        self.request = request
        super().__init__(f"{message} ({request})" if request else message)


class Transport:
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
        self._session: aiohttp.ClientSession | None = None
        self._session_cert: tuple[bytes, bytes] | None = None
        self._retired: set[aiohttp.ClientSession] = set()
        self._retiring: set[asyncio.Task[None]] = set()
        self._warned: set[str] = set()
        self._closed = False
        self._headers = {
            "Accept": "application/json",
            "User-Agent": config.user_agent,
            "Accept-Encoding": "gzip" if config.compression else "identity",
        }
        self._headers.update(dict(config.extra_headers))
        self.observer: Callable[[str, str, float], None] | None = None
        """Called with (method, status code or ``"<error>"``, seconds until the response headers)
        for every attempt; the manager exports it as ``rest_client_requests_total`` and
        ``rest_client_request_duration_seconds``. Watches count their start only."""

    # -- session --------------------------------------------------------------------------------

    def _new_session(self, client_cert: tuple[bytes, bytes] | None) -> aiohttp.ClientSession:
        tls: ssl.SSLContext | bool = False
        if self._base.startswith("https://"):
            tls = ssl_context(self.config, client_cert)
        connector = aiohttp.TCPConnector(
            ssl=tls,
            limit=self.config.max_connections,
            keepalive_timeout=60.0,
            enable_cleanup_closed=False,
        )
        return aiohttp.ClientSession(
            connector=connector,
            headers=self._headers,
            read_bufsize=1 << 20,
            auto_decompress=True,
        )

    async def _prepare(self) -> tuple[aiohttp.ClientSession, Credentials]:
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

    def _retire(self, session: aiohttp.ClientSession) -> None:
        self._retired.add(session)

        async def close_later() -> None:
            await asyncio.sleep(_RETIRED_POOL_GRACE)
            self._retired.discard(session)
            await session.close()

        task = asyncio.get_running_loop().create_task(close_later())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._retiring):
            task.cancel()
        sessions = [*self._retired, *([self._session] if self._session else [])]
        self._session = None
        self._retired.clear()
        for session in sessions:
            await session.close()

    # -- sending --------------------------------------------------------------------------------

    def _timeout(self, req: Request) -> aiohttp.ClientTimeout:
        if not req.stream:
            return aiohttp.ClientTimeout(
                total=self.config.request_timeout, connect=self.config.connect_timeout
            )
        seconds = dict(req.query).get("timeoutSeconds")
        total = float(seconds) + _WATCH_GRACE if seconds else None
        return aiohttp.ClientTimeout(total=total, connect=self.config.connect_timeout, sock_read=None)

    async def _send(self, req: Request) -> aiohttp.ClientResponse:
        """Send with rate limit, auth refresh and retries; returns a response with status < 400.

        The caller reads and releases the response. Error responses are read, decoded and raised
        here.
        """
        attempt = 0
        refreshed = False
        url = URL(self._base + req.url, encoded=True)
        while True:
            attempt += 1
            if self.limiter is not None:
                await self.limiter.acquire()
            session, creds = await self._prepare()
            headers = creds.headers
            if req.content_type or req.accept:
                headers = dict(headers)
                if req.content_type:
                    headers["Content-Type"] = req.content_type
                if req.accept:
                    headers["Accept"] = req.accept
            started = time.perf_counter()
            try:
                resp = await session.request(
                    req.method,
                    url,
                    data=req.body,
                    headers=headers,
                    timeout=self._timeout(req),
                    proxy=self.config.proxy_url,
                    server_hostname=self.config.tls_server_name,
                )
            except (aiohttp.ClientConnectionError, TimeoutError) as e:
                if self.observer is not None:
                    self.observer(req.method, "<error>", time.perf_counter() - started)
                if self.retry.should_retry(attempt, status=None, idempotent=req.idempotent):
                    await asyncio.sleep(self.retry.delay(attempt))
                    continue
                raise self._connection_error(e, req) from None
            if self.observer is not None:
                self.observer(req.method, str(resp.status), time.perf_counter() - started)
            if resp.status < 400:
                warning = resp.headers.get("Warning")
                if warning and warning not in self._warned:
                    # Deprecation warnings repeat on every request; say each one once per client.
                    self._warned.add(warning)
                    log.warning("API server warning on %s: %s", req, warning)
                return resp
            try:
                body = await resp.read()
            except (aiohttp.ClientError, TimeoutError) as e:
                raise self._connection_error(e, req) from None
            finally:
                resp.release()
            retry_after = parse_retry_after(resp.headers.get("Retry-After"))
            if resp.status == 401 and not refreshed:
                refreshed = True
                if await self.auth.refresh():
                    attempt -= 1  # a credential refresh is not a retry
                    continue
            if self.retry.should_retry(attempt, status=resp.status, idempotent=req.idempotent):
                await asyncio.sleep(self.retry.delay(attempt, retry_after))
                continue
            raise self._api_error(resp.status, body, retry_after, req)

    def _api_error(self, status: int, body: bytes, retry_after: float | None, req: Request) -> ApiError:
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

    def _connection_error(self, e: BaseException, req: Request) -> ApiConnectionError:
        where = f"API server {self._base} ({self.config.source})"
        if isinstance(e, aiohttp.ClientConnectorCertificateError):
            msg = f"TLS verification of {where} failed: {e.certificate_error}"
        elif isinstance(e, aiohttp.ClientConnectorSSLError):
            msg = f"TLS handshake with {where} failed: {e.os_error}"
        elif isinstance(e, aiohttp.ClientConnectorError):
            msg = f"cannot connect to {where}: {e.os_error.strerror or e.os_error}"
        elif isinstance(e, TimeoutError):
            msg = f"timed out talking to {where}"
        else:
            msg = f"connection to {where} failed: {e}"
        return ApiConnectionError(msg, request=str(req))

    async def request(self, req: Request) -> Any:
        """Send ``req`` and return the decoded JSON body (``None`` for an empty body)."""
        resp = await self._send(req)
        try:
            body = await resp.read()
        except (aiohttp.ClientError, TimeoutError) as e:
            raise self._connection_error(e, req) from None
        finally:
            resp.release()
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
        session, creds = await self._prepare()
        req = Request("GET", path, target=f"health check {path}")
        url = URL(self._base + path, encoded=True)
        try:
            async with session.get(
                url, headers=creds.headers, timeout=aiohttp.ClientTimeout(total=time_limit)
            ) as resp:
                await resp.read()
                return resp.status
        except (aiohttp.ClientError, TimeoutError) as e:
            raise self._connection_error(e, req) from None

    async def stream(self, req: Request) -> AsyncGenerator[WatchEvent[dict[str, Any]], None]:
        """Send a watch request and yield its events as they arrive.

        Ends when the server closes the stream (timeoutSeconds); raises the typed error of an
        ERROR event (``Gone`` for an expired resourceVersion). Closing the iterator (``break``,
        cancellation) closes the connection.
        """
        resp = await self._send(req)
        text = str(req)
        try:
            async for line in split_lines(resp.content.iter_any()):
                yield decode_event(line, request=text, target=req.target)
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, TimeoutError) as e:
            raise self._connection_error(e, req) from None
        finally:
            resp.close()
