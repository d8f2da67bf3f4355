"""The self-signed TLS context of HTTPS metrics: verifiable with its CA, TLS 1.2+, no key on disk."""

from __future__ import annotations

import asyncio
import os
import ssl
import tempfile
from pathlib import Path

import pytest

from kubeop.manager import serving_tls
from kubeop.manager.serving_tls import self_signed


async def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, host: str) -> str:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        async with asyncio.timeout(10):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client_ctx, server_hostname=host
            )
            version = writer.get_extra_info("ssl_object").version()
            assert await reader.read() == b"hello"
            writer.close()
            return str(version)
    finally:
        server.close()
        await server.wait_closed()


def _client(ca_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    return ctx


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "metrics.example"])
async def test_the_certificate_verifies_with_its_ca_for_each_host(host: str) -> None:
    tls = self_signed(["metrics.example", "0.0.0.0"])
    assert "0.0.0.0" not in tls.hosts and "metrics.example" in tls.hosts
    version = await _handshake(tls.context, _client(tls.ca_pem), host)
    assert version in ("TLSv1.2", "TLSv1.3")


async def test_another_host_name_does_not_verify() -> None:
    tls = self_signed()
    with pytest.raises(ssl.SSLCertVerificationError):
        await _handshake(tls.context, _client(tls.ca_pem), "elsewhere.example")


def test_the_key_stays_out_of_the_repr() -> None:
    tls = self_signed()
    assert "PRIVATE" not in repr(tls) and "CERTIFICATE" not in repr(tls)


def test_without_memory_files_a_private_directory_is_used_and_removed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delattr(os, "memfd_create", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen: list[tuple[str, int]] = []
    real = serving_tls._write_all

    def spy(fd: int, data: bytes) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}") if os.path.isdir("/proc/self/fd") else ""
        seen.append((path, os.fstat(fd).st_mode & 0o777))
        real(fd, data)

    monkeypatch.setattr(serving_tls, "_write_all", spy)
    tls = self_signed()
    asyncio.run(_handshake(tls.context, _client(tls.ca_pem), "127.0.0.1"))
    assert [mode for _, mode in seen] == [0o600, 0o600]
    assert all(path.startswith(str(tmp_path)) for path, _ in seen)
    assert list(tmp_path.iterdir()) == []  # removed once loaded


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memory files are Linux's")
def test_on_linux_the_key_is_only_ever_in_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    seen: list[str] = []
    real = serving_tls._write_all

    def spy(fd: int, data: bytes) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd, data)

    monkeypatch.setattr(serving_tls, "_write_all", spy)
    self_signed()
    assert len(seen) == 2 and all(path.startswith("/memfd:") for path in seen), seen
    assert list(tmp_path.iterdir()) == []
