"""The webhook server's memory under a flood of idle and partial-body connections (no control plane).

The review's reproduction, as a script: a WebhookServer (TLS, server.py's webhook) in its own
process, imported from ``--src``; IDLE connections that shake hands and send nothing, then
PARTIAL ones that announce a 7 MiB body and send all of it but one byte; the server's RSS after
each wave, then how long a real review takes to be answered in the middle of the flood.

    ulimit -n 16384
    .venv/bin/python bench/webhook/flood.py --src /tmp/kubeop-main/src --idle 3000 --partial 30
    .venv/bin/python bench/webhook/flood.py --src src --idle 3000 --partial 30
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
BODY = 7 * 1024 * 1024
REVIEW = json.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "operation": "CREATE",
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
        },
    }
).encode()


def head(length: int) -> bytes:
    return (
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % length
    )


async def serve(cert_dir: str) -> None:
    sys.path.insert(0, str(HERE))
    from server import allow

    from kubeop.webhook import Webhooks, WebhookServer, local_certificates

    local_certificates(cert_dir)
    server = WebhookServer(Webhooks([allow]), "127.0.0.1:0", cert_dir=cert_dir)
    await server.start()
    print(server.port, flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await server.stop()


def rss_mib(pid: int) -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def flood(pid: int, port: int, cert_dir: str, idle: int, partial: int) -> None:
    ctx = ssl.create_default_context(cafile=f"{cert_dir}/ca.crt")
    writers = []
    print(f"server RSS at start: {rss_mib(pid):.1f} MiB", flush=True)
    for _ in range(idle):
        with contextlib.suppress(OSError):
            writers.append((await asyncio.open_connection("127.0.0.1", port, ssl=ctx))[1])
    await asyncio.sleep(0.5)
    print(f"after {idle} idle connections: {rss_mib(pid):.1f} MiB", flush=True)
    body = b"x" * (BODY - 1)
    for _ in range(partial):
        with contextlib.suppress(OSError, TimeoutError):
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
            writers.append(writer)
            writer.write(head(BODY) + body)
            await asyncio.wait_for(writer.drain(), 5)
    await asyncio.sleep(1)
    print(f"after {partial} partial 7 MiB bodies: {rss_mib(pid):.1f} MiB", flush=True)
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    writer.write(head(len(REVIEW)) + REVIEW)
    status = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)).split(b"\r\n")[0].decode()
    print(f"a review during the flood: {status} in {(time.perf_counter() - t0) * 1000:.1f} ms", flush=True)
    for w in [*writers, writer]:
        w.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", default=str(HERE.parent.parent / "src"), help="kubeop's src directory")
    parser.add_argument("--idle", type=int, default=3000)
    parser.add_argument("--partial", type=int, default=30)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve))
        return
    cert_dir = tempfile.mkdtemp()
    env = dict(os.environ, PYTHONPATH=str(Path(args.src).resolve()))
    cmd = [sys.executable, __file__, "--serve", cert_dir]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    try:
        port = int(proc.stdout.readline())
        asyncio.run(flood(proc.pid, port, cert_dir, args.idle, args.partial))
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
