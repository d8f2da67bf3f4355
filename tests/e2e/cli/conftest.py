"""Helpers for the CLI's tests on the real control plane: run ``kubeop`` as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

KUBEOP_SOURCE = Path(__file__).resolve().parents[3]
DOMAIN = "cli-tests.kubeop.dev"


def kubeop(
    *args: str,
    cwd: Path,
    kubeconfig: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python -m kubeop ARGS`` in ``cwd``, against ``kubeconfig``; never raises on failure."""
    full = {**os.environ, **(env or {})}
    if kubeconfig is not None:
        full["KUBECONFIG"] = kubeconfig
    return subprocess.run(
        [sys.executable, "-m", "kubeop", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(res: subprocess.CompletedProcess[str]) -> str:
    """The command's stderr (its progress), after asserting it succeeded."""
    assert res.returncode == 0, f"exit {res.returncode}\nstdout: {res.stdout}\nstderr: {res.stderr}"
    assert "Traceback" not in res.stderr, res.stderr
    return res.stderr


def scaffold(parent: Path, name: str, group: str, kind: str) -> Path:
    """``kubeop init`` + ``kubeop create api`` in ``parent/name``; returns the project root."""
    root = parent / name
    root.mkdir()
    ok(
        kubeop(
            "init",
            "--domain",
            DOMAIN,
            "--repo",
            f"github.com/example/{name}",
            cwd=root,
            env={"KUBEOP_SOURCE": str(KUBEOP_SOURCE)},
        )
    )
    ok(kubeop("create", "api", "--group", group, "--version", "v1", "--kind", kind, cwd=root))
    return root
