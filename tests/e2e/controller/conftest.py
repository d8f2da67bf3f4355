from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from kubeop.client import Client
from kubeop.manager import Manager

T = TypeVar("T")


@contextlib.asynccontextmanager
async def running(manager: Manager) -> AsyncIterator[Manager]:
    """Run a manager in the background for the body of a ``async with``; stop it gracefully after."""
    stop = asyncio.Event()
    task = asyncio.create_task(manager.start(stop))
    try:
        deadline = time.monotonic() + 30
        while not manager._synced:
            if task.done():
                task.result()
            if time.monotonic() > deadline:
                raise AssertionError("manager did not start within 30 s")
            await asyncio.sleep(0.02)
        yield manager
    finally:
        stop.set()
        await asyncio.wait_for(task, 40)


async def eventually(fn: Callable[[], Awaitable[T]], timeout: float = 30.0, what: str = "condition") -> T:
    """Poll ``fn`` until it returns a truthy value (returned) or the timeout (AssertionError)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = await fn()
        except Exception as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last value: {last!r}")
        await asyncio.sleep(0.1)


def client_for(kubeconfig: str) -> Client:
    return Client.from_kubeconfig(kubeconfig, qps=None)
