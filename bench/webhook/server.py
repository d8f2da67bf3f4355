"""A trivial validating webhook served by kubeop.webhook.WebhookServer (the benchmark's subject).

python bench/webhook/server.py PORT CERT_DIR
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from kubeop.core.resource import ApiResource
from kubeop.webhook import Webhooks, WebhookServer, validating

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")


@validating(
    CONFIGMAPS,
    name="bench.webhook.kubeop.dev",
    path="/validate",
    object_selector={"matchLabels": {"bench": "kubeop"}},
)
async def allow(new: dict[str, Any]) -> None:
    return None


async def main(port: int, cert_dir: str) -> None:
    server = WebhookServer(Webhooks([allow]), f"127.0.0.1:{port}", cert_dir=cert_dir)
    await server.start()
    print("ready", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    print(f"TLS handshakes: {server.handshakes_since_reload}", flush=True)
    await server.stop()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
