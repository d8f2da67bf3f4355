"""The PhpDeployment Helm operator running in-process against the session's control plane."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from examples.php_deployment.crd import CRD
from examples.php_deployment.operator import PHP_DEPLOYMENTS, operator

from kubeop.client import Client
from kubeop.helm import HelmOperator, Watch, find_helm
from kubeop.manager import Manager, Serving
from kubeop.testing import ControlPlane
from kubeop.testing.binaries import ensure_binaries

from ..controller.conftest import client_for, running


@dataclass
class HelmCli:
    """The helm binary on the command line, as a person would use it (no operator involved)."""

    binary: Path
    kubeconfig: str
    home: Path

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBECONFIG"))}
        env.update(
            HELM_CACHE_HOME=str(self.home / "cache"),
            HELM_CONFIG_HOME=str(self.home / "config"),
            HELM_DATA_HOME=str(self.home / "data"),
        )
        done = subprocess.run(
            [str(self.binary), *args, "--kubeconfig", self.kubeconfig],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed: {done.stderr}")
        return done

    def releases(self, namespace: str) -> dict[str, dict[str, Any]]:
        out = self("list", "--all", "--namespace", namespace, "--output", "json").stdout
        return {r["name"]: r for r in json.loads(out or "[]")}


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    ensure_binaries(with_helm=True)  # builds the pinned helm once if the cache lacks it
    return find_helm()


@pytest.fixture
def helm_cli(control_plane: ControlPlane, helm_binary: Path, tmp_path: Path) -> HelmCli:
    return HelmCli(helm_binary, control_plane.kubeconfig_path, tmp_path / "helm-home")


@pytest.fixture
def php_crd(control_plane: ControlPlane) -> None:
    control_plane.install_crds([CRD])


@dataclass
class Running:
    client: Client
    operator: HelmOperator
    manager: Manager


@contextlib.asynccontextmanager
async def php_operator(
    control_plane: ControlPlane, namespace: str, watches: Sequence[Watch] = (), **options: Any
) -> AsyncIterator[Running]:
    """Run the PhpDeployment operator (or one for ``watches`` of PhpDeployments) until the body
    ends; then clear what a test left behind."""
    async with client_for(control_plane.kubeconfig_path) as client:
        op = (
            HelmOperator(watches, namespace=namespace, **options)
            if watches
            else operator(namespace=namespace, **options)
        )
        manager = Manager(
            client, name="php-deployment-operator", serving=Serving(metrics_address=None, health_address=None)
        )
        op.add_to(manager)
        try:
            async with running(manager):
                yield Running(client, op, manager)
        finally:
            op.close()
            # A resource whose finalizer the stopped operator can no longer remove would keep the
            # namespace terminating forever.
            for obj in (await client.list(PHP_DEPLOYMENTS, namespace=namespace)).items:
                with contextlib.suppress(Exception):
                    await client.patch(
                        PHP_DEPLOYMENTS,
                        obj["metadata"]["name"],
                        {"metadata": {"finalizers": None}},
                        namespace=namespace,
                    )
