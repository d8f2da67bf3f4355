"""CPU of kopf_operator.py's own API calls: one ``kubernetes`` client call, as its handlers make it.

The kopf operator's handlers write the ConfigMap with the official client, building a new
``CoreV1Api()`` (so a new connection pool and TLS handshake) per call. That work is the
handler's, the same under kopf and under kubeop.kopf; this measures it in the calling thread's
CPU time (``time.thread_time``) against a local HTTPS server answering a canned ConfigMap, so
the framework's share of run.py's CPU per object can be told apart. Run with the kopf venv:

    PYTHONPATH=src bench/operator/.venv-kopf/bin/python bench/operator/kopf_handler_cost.py
"""

from __future__ import annotations

import asyncio
import http.server
import json
import socketserver
import ssl
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import kubernetes

from kubeop.client import Client, ClientConfig
from kubeop.core.resource import ApiResource
from kubeop.webhook.certs import local_certificates

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")

OWNER = {
    "apiVersion": "bench.kubeop.dev/v1",
    "kind": "Widget",
    "name": "w00001",
    "uid": "x",
    "controller": True,
}
CM: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "w00001",
        "namespace": "ns",
        "uid": "u",
        "resourceVersion": "1",
        "ownerReferences": [OWNER],
    },
    "data": {"value": "one"},
}
ANSWER = json.dumps(CM).encode()


class Canned(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    do_POST = do_PATCH = _answer

    def log_message(self, *args: Any) -> None:
        pass


def main(n: int = 500) -> None:
    certs = local_certificates(tempfile.mkdtemp(prefix="kopf-handler-cost-"))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs.cert_file, certs.key_file)
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Canned)
    server.daemon_threads = True
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ca = certs.directory / "ca.pem"
    ca.write_bytes(certs.ca_pem)
    cfg = kubernetes.client.Configuration()
    cfg.host, cfg.ssl_ca_cert = f"https://127.0.0.1:{server.server_address[1]}", str(ca)
    kubernetes.client.Configuration.set_default(cfg)
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": CM["metadata"], "data": {"value": "one"}}
    calls = {
        "create (new CoreV1Api per call, as the operator)": lambda: (
            kubernetes.client.CoreV1Api().create_namespaced_config_map("ns", body)
        ),
        "patch (new CoreV1Api per call, as the operator)": lambda: (
            kubernetes.client.CoreV1Api().patch_namespaced_config_map(
                "w00001", "ns", {"data": {"value": "two"}}
            )
        ),
    }
    shared = kubernetes.client.CoreV1Api()
    calls["patch (one CoreV1Api, kept-alive connection)"] = lambda: shared.patch_namespaced_config_map(
        "w00001", "ns", {"data": {"value": "two"}}
    )
    for label, call in calls.items():
        for _ in range(50):
            call()
        t0 = time.thread_time()
        for _ in range(n):
            call()
        print(f"{label}: {(time.thread_time() - t0) * 1000 / n:.2f} ms CPU per call")
    asyncio.run(async_clients(f"https://127.0.0.1:{server.server_address[1]}", certs.ca_pem, n))
    server.shutdown()


async def async_clients(url: str, ca_pem: bytes, n: int) -> None:
    """The same patch from a coroutine, with one kept-alive async client (kopf_operator_async.py's
    choice: kubeop's Client; aiohttp, kopf's own HTTP library, beside it when installed)."""
    patch = {"data": {"value": "two"}}
    calls: dict[str, Callable[[], Awaitable[Any]]] = {}
    kubeop_client = Client(ClientConfig(server=url, ca_data=ca_pem, qps=None))
    calls["patch (kubeop's async Client, kept-alive, in a coroutine)"] = lambda: kubeop_client.patch(
        CONFIGMAPS, "w00001", patch, namespace="ns"
    )
    session = None
    try:
        import aiohttp

        ssl_ctx = ssl.create_default_context(cadata=ca_pem.decode())
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ssl_ctx))

        async def aiohttp_patch() -> Any:
            assert session is not None
            async with session.patch(
                f"{url}/api/v1/namespaces/ns/configmaps/w00001",
                data=json.dumps(patch),
                headers={"Content-Type": "application/merge-patch+json"},
            ) as resp:
                return await resp.json()

        calls["patch (aiohttp session, kept-alive, in a coroutine)"] = aiohttp_patch
    except ImportError:
        pass
    for label, call in calls.items():
        for _ in range(50):
            await call()
        t0 = time.thread_time()
        for _ in range(n):
            await call()
        print(f"{label}: {(time.thread_time() - t0) * 1000 / n:.2f} ms CPU per call")
    await kubeop_client.close()
    if session is not None:
        await session.close()


if __name__ == "__main__":
    main()
