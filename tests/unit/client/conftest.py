from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .fakeapi import FakeApi, start


@pytest.fixture
async def api() -> AsyncIterator[FakeApi]:
    async for fake in start():
        yield fake
