"""An operator process imports only what it uses: the optional subsystems (metrics exposition,
sharding, webhooks, the dashboard, kopf and Helm operators, fleets, declared kinds) and the heavy modules
they bring load on first use, not with kubeop.manager, kubeop.controller and kubeop.client.

Each check runs in a fresh interpreter (this one has imported everything already)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_SRC = str(Path(__file__).resolve().parents[2] / "src")

# Loaded on first use only: an operator that serves no metrics, has no webhooks and declares no
# kinds of its own never imports them.
_OPTIONAL = (
    "prometheus_client",
    "kubeop.manager._exposition",
    "kubeop.manager.delegated_auth",
    "kubeop.manager.serving_tls",
    "kubeop.manager.sharding",
    "kubeop.manager.membership",
    "kubeop.manager.labeller",
    "kubeop.client.httpserver",
    "tempfile",
    "http.server",
    "http.client",
    "urllib.request",
    "email",
    "yaml",
    "pydantic",
    "cryptography",
    "kubeop.webhook",
    "kubeop.dashboard",
    "kubeop.kopf",
    "kubeop.helm",
    "kubeop.fleet",
    "kubeop.crd",
    "kubeop.apiserver",
    "kubeop.cli",
    "kubeop.testing",
)

_OPERATOR = """
from kubeop.controller import Controller
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager, Serving

async def reconcile(req, ctx):
    pass

manager = Manager(name="widgets", serving=Serving(metrics_address=None, health_address=None))
manager.add(Controller.for_(ApiResource("", "v1", "configmaps", "ConfigMap")).reconcile(reconcile))
"""


def _loaded(code: str) -> list[str]:
    """The optional modules loaded after running ``code`` in a fresh interpreter."""
    probe = (
        f"{code}\nimport sys\n"
        f"print('\\n'.join(sorted(m for m in sys.modules if m.split('.')[0] in {_OPTIONAL!r} "
        f"or any(m == o or m.startswith(o + '.') for o in {_OPTIONAL!r}))))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_SRC, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.parametrize(
    "code",
    [
        "import kubeop",
        "import kubeop.client",
        "import kubeop.manager, kubeop.controller",
        "from kubeop import Manager, Controller, Client, Request, Context, Result",
    ],
)
def test_importing_the_operator_api_loads_no_optional_subsystem(code: str) -> None:
    assert _loaded(code) == []


def test_a_manager_without_metrics_loads_no_metrics_library() -> None:
    assert _loaded(_OPERATOR) == []


def test_a_manager_loads_the_metrics_library_when_its_metrics_are_used() -> None:
    loaded = _loaded(_OPERATOR + "manager.metrics.reconcile_total\n")
    assert "prometheus_client" in loaded


def test_a_manager_loads_sharding_when_it_shards() -> None:
    loaded = _loaded(_OPERATOR + "from kubeop.manager import ShardLeaseLost\n")
    assert "kubeop.manager.membership" in loaded
