"""The public API of kubeop.core and kubeop.client is what __all__ says, and it all imports."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["kubeop.core", "kubeop.client"])
def test_all_is_sorted_and_importable(module: str) -> None:
    mod = importlib.import_module(module)
    names = list(mod.__all__)
    assert names == sorted(names)
    for name in names:
        assert getattr(mod, name) is not None


def test_core_does_no_io() -> None:
    """kubeop.core must stay importable without the networking stack (checked in a fresh process)."""
    code = "import sys, kubeop.core; sys.exit('aiohttp' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_client_import_stays_light() -> None:
    """pydantic (for OpenAPI models) and cryptography (for certificate checks) load on demand."""
    code = "import sys, kubeop.client; sys.exit(bool({'pydantic', 'cryptography'} & set(sys.modules)))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_client_requests_do_not_load_aiohttp() -> None:
    """The client speaks HTTP itself (kubeop.client.http): aiohttp is ~14 MB of RSS it never needs."""
    code = """
import asyncio, sys
from kubeop.client import Client, ClientConfig

async def main():
    async def answer(reader, writer):
        await reader.readuntil(b"\\r\\n\\r\\n")
        writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
        await writer.drain()
        writer.close()
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with Client(ClientConfig(server=url, qps=None)) as client:
        assert await client.transport.probe("/readyz") == 200
    server.close()

asyncio.run(main())
sys.exit('aiohttp' in sys.modules)
"""
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
