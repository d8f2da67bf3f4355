"""Fixtures for the cache's tests on the real control plane."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from kubeop.client import Client, load_kubeconfig


@pytest.fixture(autouse=True)
def _detect_cache_mutations(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every informer in these tests checks that nobody mutates cached objects."""
    monkeypatch.setenv("KUBEOP_CACHE_MUTATION_DETECTOR", "1")
    yield


@pytest.fixture
async def client(kubeconfig_path: str) -> AsyncIterator[Client]:
    async with Client(load_kubeconfig(kubeconfig_path, qps=None)) as c:
        yield c
