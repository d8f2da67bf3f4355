"""A forward HTTP proxy on loopback for tests: CONNECT tunnels and absolute-form requests, for the
names it is told only, counting what it was asked."""

from __future__ import annotations

import asyncio
import ssl

__all__ = ["ForwardProxy"]


class ForwardProxy:
    """A forward proxy on loopback that knows ``names`` (name -> address) and nothing else.

    CONNECT tunnels for https servers, absolute-form requests for http ones (then the
    connection is relayed as it is); ``auth``, when set, is the Proxy-Authorization it requires
    (407 otherwise). Records what it was asked: ``tunnels`` the CONNECT targets it opened,
    ``relayed`` the first request line of each relayed connection, ``authorizations`` the
    Proxy-Authorization of every connection (None when absent).
    """

    def __init__(self, names: dict[str, str], auth: str | None = None) -> None:
        self.names = names
        self.auth = auth
        self.tunnels: list[str] = []
        self.relayed: list[str] = []
        self.authorizations: list[str | None] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.handlers: set[asyncio.Task[object]] = set()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self, tls: ssl.SSLContext | None = None) -> None:
        """Listen on a free loopback port; with ``tls``, clients speak TLS to the proxy itself."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for w in self.writers:
            w.close()
        for task in self.handlers:
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.handlers.add(task)
            task.add_done_callback(self.handlers.discard)
        self.writers.append(writer)
        try:
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ")
        auth = next(
            (
                v.strip()
                for k, _, v in (x.partition(":") for x in lines[1:])
                if k.lower() == "proxy-authorization"
            ),
            None,
        )
        self.authorizations.append(auth)
        if self.auth is not None and auth != self.auth:
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        hostport = target if method == "CONNECT" else target.split("/")[2]
        host, _, port = hostport.rpartition(":")
        address = self.names.get(host.strip("[]"))
        try:
            if address is None:
                raise ConnectionRefusedError(f"unknown host {host}")
            async with asyncio.timeout(10):
                up_reader, up_writer = await asyncio.open_connection(address, int(port))
        except (OSError, TimeoutError):
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        self.writers.append(up_writer)
        if method == "CONNECT":
            self.tunnels.append(target)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            self.relayed.append(lines[0])
            up_writer.write(head)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()
