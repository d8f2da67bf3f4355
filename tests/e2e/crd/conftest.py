"""Fixtures for kubeop.crd's tests on the real control plane."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest

from kubeop.client import Client, load_kubeconfig

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture
async def client(kubeconfig_path: str, namespace: str) -> AsyncIterator[Client]:
    """An admin client whose default namespace is the test's fresh namespace."""
    async with Client(load_kubeconfig(kubeconfig_path, namespace=namespace, qps=None)) as c:
        yield c


def installed(control_plane: Any, crds: list[Mapping[str, Any]]) -> Iterator[list[str]]:
    """Install CRDs (waiting until Established) for a module, and delete them afterwards.

    CRD names are cluster-wide; every module uses its own group under .crd-tests.kubeop.dev.
    """
    names = control_plane.install_crds(crds)
    try:
        yield names
    finally:
        for name in names:
            control_plane.api.raw("DELETE", f"{CRDS}/{name}")
