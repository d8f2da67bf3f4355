"""An existing cluster (``KUBEOP_TEST_KUBECONFIG``) behind the same small API as ControlPlane."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kubeop.testing.binaries import BinaryError, locate_binaries
from kubeop.testing.controlplane import crd_documents


class ExistingCluster:
    """A cluster kubeop did not start: it can be used, but not stopped, restarted or re-keyed."""

    full = True

    def __init__(self, kubeconfig_path: str) -> None:
        path = Path(kubeconfig_path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"KUBEOP_TEST_KUBECONFIG points at {path}, which is not a file")
        self.kubeconfig_path = str(path)
        cfg: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
        ctx_name = cfg.get("current-context")
        ctx: dict[str, Any] = next(
            (c["context"] for c in cfg.get("contexts", []) if c.get("name") == ctx_name), {}
        )
        cluster: dict[str, Any] = next(
            (c["cluster"] for c in cfg.get("clusters", []) if c.get("name") == ctx.get("cluster")), {}
        )
        self.server: str = cluster.get("server", "")

    def _kubectl_path(self) -> str:
        try:
            return str(locate_binaries(full=False).kubectl)
        except BinaryError:
            found = shutil.which("kubectl")
            if found is None:
                raise
            return found

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        kubeconfig: str | None = None,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against the cluster (or with another ``kubeconfig``); with ``check``, a failure raises
        naming the command and its output.
        """
        cmd = [self._kubectl_path(), f"--kubeconfig={kubeconfig or self.kubeconfig_path}", *args]
        res = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False)
        if check and res.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({res.returncode}): {res.stderr.strip()}")
        return res

    def create_namespace(self, name: str) -> None:
        """Create a namespace."""
        self.kubectl("create", "namespace", name)

    def delete_namespace(self, name: str) -> None:
        """Start deleting a namespace without waiting (a missing one is fine)."""
        self.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")

    def install_crds(
        self, crds: Iterable[str | os.PathLike[str] | Mapping[str, Any]], timeout: float = 30.0
    ) -> list[str]:
        """Create or update CRDs (from YAML/JSON files or dicts) and wait until each is Established.

        The same contract as :meth:`ControlPlane.install_crds`, through kubectl (server-side apply),
        so any kubeconfig kubectl accepts works (tokens, exec plugins).
        """
        objects = crd_documents(crds)
        names = [str(obj["metadata"]["name"]) for obj in objects]
        if not names:
            return names
        self.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=kubeop-test",
            "-f",
            "-",
            input=yaml.safe_dump_all([dict(o) for o in objects], sort_keys=False),
            timeout=timeout + 30,
        )
        self.kubectl(
            "wait",
            "--for=condition=Established",
            f"--timeout={max(1, int(timeout))}s",
            *(f"customresourcedefinition/{name}" for name in names),
            timeout=timeout + 30,
        )
        return names

    def env(self) -> dict[str, str]:
        """The process environment with ``KUBECONFIG`` pointing at the cluster."""
        return dict(os.environ, KUBECONFIG=self.kubeconfig_path)

    def kubeconfig_for_user(self, name: str, groups: tuple[str, ...] = ()) -> str:
        """Not possible on an existing cluster: raises NotImplementedError saying to run the test against the
        local control plane.
        """
        raise NotImplementedError(
            "minting users needs the cluster's CA key, which an existing cluster does not give kubeop; "
            "run this test against the local control plane (unset KUBEOP_TEST_KUBECONFIG)"
        )
