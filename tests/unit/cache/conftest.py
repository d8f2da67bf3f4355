"""Every informer in the cache's unit tests checks that nobody mutates cached objects."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _detect_cache_mutations(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KUBEOP_CACHE_MUTATION_DETECTOR", "1")
    yield
