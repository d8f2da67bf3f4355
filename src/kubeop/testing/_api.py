"""A minimal synchronous HTTPS caller for the control plane's own bootstrap work.

kubeop.testing starts and checks the cluster before any operator code runs, and must stay usable
when the async client is the thing under test; so it uses the standard library only.
"""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any


class ApiCallError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:500]}")
        self.status = status


class AdminAPI:
    """Calls to one API server with a client certificate (or none, for health endpoints)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        if ca_file:
            ctx = ssl.create_default_context(cafile=ca_file)
        else:  # our own loopback component's self-signed serving cert (health checks only)
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if cert_file and key_file:
            ctx.load_cert_chain(cert_file, key_file)
        self._ctx = ctx
        self._conn: http.client.HTTPSConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def raw(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = http.client.HTTPSConnection(
                    self.host, self.port, context=self._ctx, timeout=self.timeout
                )
            try:
                self._conn.request(method, path, body=data, headers=headers)
                resp = self._conn.getresponse()
                return resp.status, resp.read()
            except (OSError, http.client.HTTPException):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        status, payload = self.raw(method, path, body, content_type)
        if status >= 400:
            raise ApiCallError(method, path, status, payload.decode(errors="replace"))
        return json.loads(payload) if payload else None

    def ok(self, path: str) -> bool:
        try:
            status, _ = self.raw("GET", path)
        except (OSError, http.client.HTTPException):
            return False
        return status == 200
