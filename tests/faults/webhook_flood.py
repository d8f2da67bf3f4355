"""A flood of slow and idle connections against a webhook server, run as a separate process by
``test_webhook_flood.py`` (so its own CPU is not the server's or the measuring client's).

    python webhook_flood.py --port PORT [--idle 2500] [--tls-idle 500] [--slow-headers 50]
        [--slow-bodies 30] [--body-mib 7]

Each slot keeps one connection of its kind open and opens a new one as soon as the server closes
it (an attacker keeps the pressure on; eviction must not be a way out):

    idle          TCP connected, nothing sent (not even a TLS ClientHello)
    tls-idle      TLS handshake done, then silence
    slow-headers  a request line, then one header byte per second, never ending the head
    slow-bodies   a complete head announcing a body just under the server's 7 MiB cap, then
                  ``--sent-mib`` of it at once, then silence

One line on stdout per event, for the harness:

    open N        every slot has tried to connect once (N slots; or 30 s have passed)
    stats J       once per second: a JSON object with, per kind, connections currently open,
                  opened in total and closed by the server (``reconnects``)

It exits when stdin is closed (the harness ended it) or on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import signal
import ssl
import sys
from dataclasses import asdict, dataclass

KINDS = ("idle", "tls-idle", "slow-headers", "slow-bodies")


@dataclass
class Count:
    open: int = 0
    opened: int = 0
    reconnects: int = 0
    refused: int = 0


class Flood:
    def __init__(self, port: int, sent_mib: float, body_mib: float) -> None:
        self.port = port
        self.sent = int(sent_mib * 1024 * 1024)
        self.declared = int(body_mib * 1024 * 1024) - 1
        self.counts = {kind: Count() for kind in KINDS}
        self.tls = ssl.create_default_context()
        self.tls.check_hostname = False
        self.tls.verify_mode = ssl.CERT_NONE
        self.first = asyncio.Event()
        self.pending = 0

    async def slot(self, kind: str) -> None:
        count = self.counts[kind]
        first = True
        while True:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", self.port, ssl=None if kind == "idle" else self.tls),
                    30,
                )
            except (OSError, TimeoutError, ssl.SSLError):
                count.refused += 1
                first = self.attempted(first)
                await asyncio.sleep(0.2)
                continue
            count.open += 1
            count.opened += 1
            first = self.attempted(first)
            try:
                await self.behave(kind, reader, writer)
            except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
                pass
            finally:
                count.open -= 1
                count.reconnects += 1
                writer.transport.abort()
            await asyncio.sleep(0.05)

    def attempted(self, first: bool) -> bool:
        """Count a slot's first attempt (connected or refused); returns False from then on."""
        if first:
            self.pending -= 1
            if self.pending == 0:
                self.first.set()
        return False

    async def behave(self, kind: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if kind == "slow-headers":
            writer.write(b"POST /validate HTTP/1.1\r\nHost: flood\r\n")
            await writer.drain()
            while True:
                await asyncio.sleep(1)
                writer.write(b"x")
                await writer.drain()
                if reader.at_eof():
                    return
        if kind == "slow-bodies":
            head = (
                "POST /validate HTTP/1.1\r\nHost: flood\r\nContent-Type: application/json\r\n"
                f"Content-Length: {self.declared}\r\n\r\n"
            )
            writer.write(head.encode() + b" " * self.sent)
            await writer.drain()
        # idle, tls-idle, and a slow body after its first part: wait until the server closes
        while await reader.read(65536):
            pass

    async def report(self) -> None:
        while True:
            await asyncio.sleep(1)
            say("stats " + json.dumps({kind: asdict(c) for kind, c in self.counts.items()}))


def say(line: str) -> None:
    print(line, flush=True)


async def main(args: argparse.Namespace) -> None:
    flood = Flood(args.port, args.sent_mib, args.body_mib)
    plan = {"idle": args.idle, "tls-idle": args.tls_idle, "slow-headers": args.slow_headers}
    plan["slow-bodies"] = args.slow_bodies
    flood.pending = sum(plan.values())
    tasks = []
    for kind, n in plan.items():
        for _ in range(n):
            tasks.append(asyncio.create_task(flood.slot(kind)))
            if len(tasks) % 100 == 0:
                await asyncio.sleep(0)  # let handshakes progress while the slots start
    if flood.pending == 0:
        flood.first.set()
    reporter = asyncio.create_task(flood.report())
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(flood.first.wait(), 30)
    say(f"open {len(tasks)}")
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    loop.add_reader(sys.stdin.fileno(), lambda: done.set() if not sys.stdin.buffer.read1(1) else None)
    await done.wait()
    for task in [*tasks, reporter]:
        task.cancel()
    await asyncio.gather(*tasks, reporter, return_exceptions=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle", type=int, default=2500)
    parser.add_argument("--tls-idle", type=int, default=500)
    parser.add_argument("--slow-headers", type=int, default=50)
    parser.add_argument("--slow-bodies", type=int, default=30)
    parser.add_argument("--body-mib", type=float, default=7.0)
    parser.add_argument("--sent-mib", type=float, default=5.0)
    arguments = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main(arguments))
