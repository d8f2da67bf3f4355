"""The Memcached tutorial (docs/tutorials/memcached.md), as a new user walks it, with the files the
page shows (docs/tutorials/memcached/): ``kubeop init``, ``create api``, a model with a size, a
controller that owns a Deployment and finalizes with an Event, and the generated project's own
``make test`` in each mode its README names: its own minimal control plane, its own full one, and
an existing cluster (this suite's control plane, through ``KUBEOP_TEST_KUBECONFIG``).

The project's tests leave a Memcached behind on purpose: the ``operator`` fixture must delete it and
keep the operator running until its finalizer is done, or the namespace stays Terminating forever.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import DOMAIN, KUBEOP_SOURCE, scaffold

pytestmark = pytest.mark.controlplane

GROUP = f"cache.{DOMAIN}"

# The files docs/tutorials/memcached.md shows: the test builds the project the page describes.
TUTORIAL = KUBEOP_SOURCE / "docs" / "tutorials" / "memcached"


def tutorial_file(name: str) -> str:
    """A file of the tutorial, with the page's group (domain example.com) made this suite's."""
    return (TUTORIAL / name).read_text().replace("cache.example.com", GROUP)


# A finalizer nobody removes: the operator fixture's bound ends the wait, removes it, and errors.
STUCK_TEST = '''"""A Memcached with a finalizer the operator does not know."""

from __future__ import annotations

import pytest
from kubeop.client import Client

from memcached_operator.api.v1.memcached import Memcached

from . import conftest
from .conftest import Operator, load_sample


async def test_left_with_a_foreign_finalizer(
    monkeypatch: pytest.MonkeyPatch, client: Client, operator: Operator, namespace: str
) -> None:
    monkeypatch.setattr(conftest, "FINALIZE_TIMEOUT", 1.0)
    sample = load_sample(Memcached, "cache_v1_memcached.yaml", namespace)
    sample.metadata.name = "stuck"
    sample.metadata.finalizers = ["example.com/never-removed"]
    await client.create(sample)
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    page = (KUBEOP_SOURCE / "docs" / "tutorials" / "memcached.md").read_text()
    for command in (  # what scaffold() runs below, as the page tells a reader to (its own domain)
        "kubeop init --domain example.com --repo github.com/example/memcached-operator",
        "kubeop create api --group cache --version v1 --kind Memcached",
        "spec:\n  size: 2",
    ):
        assert command in page, f"docs/tutorials/memcached.md no longer says {command!r}: update this test"
    root = scaffold(tmp_path_factory.mktemp("tutorial"), "memcached-operator", "cache", "Memcached")
    model = root / "memcached_operator/api/v1/memcached.py"
    generated = model.read_text()
    imports = "from kubeop import CamelModel, CustomResource, ListType, PrinterColumn"
    assert imports in generated, "the kind template's kubeop import changed: update this tutorial"
    text = generated.replace(
        imports, "from kubeop import CamelModel, CustomResource, Format, ListType, PrinterColumn"
    )
    start = text.index("class MemcachedSpec(CamelModel):")
    end = text.index("\n\n\nclass MemcachedStatus", start)
    spec = tutorial_file("memcached_spec.py")
    spec = spec[spec.index("class MemcachedSpec(CamelModel):") :].rstrip("\n")
    model.write_text(text[:start] + spec + text[end:])
    controller = tutorial_file("memcached_controller.py")
    (root / "memcached_operator/controllers/memcached.py").write_text(controller)
    sample = root / "config/samples/cache_v1_memcached.yaml"
    sample.write_text(sample.read_text().split("spec:")[0] + "spec:\n  size: 2\n")
    (root / "tests/test_memcached_tutorial.py").write_text(tutorial_file("test_memcached_tutorial.py"))
    return root


def _env(project: Path, existing: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBEOP_TEST_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(project), os.environ.get("PYTHONPATH")) if p)
    if existing is not None:
        env["KUBEOP_TEST_KUBECONFIG"] = existing
    return env


def make_test(project: Path, *, existing: str | None = None, args: str = "") -> str:
    """The project's ``make test`` (manifests, then pytest) as a user runs it; returns its output."""
    assert shutil.which("make"), "make is not installed: apt-get install make"
    env = _env(project, existing)
    cmd = [
        "make",
        "test",
        f"PYTHON={sys.executable}",
        f"KUBEOP={sys.executable} -m kubeop",
        f"PYTEST_ARGS=-q -p no:cacheprovider {args}",
    ]
    res = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-6000:]
    return out


def test_make_test_passes_on_its_own_minimal_control_plane(project: Path) -> None:
    out = make_test(project)
    assert "5 passed" in out, out[-3000:]


def test_make_test_passes_on_its_own_full_control_plane(project: Path) -> None:
    out = make_test(project, args="--kubeop-control-plane=full")
    assert "5 passed" in out, out[-3000:]


def test_make_test_passes_on_an_existing_cluster_and_finalizes(control_plane: Any, project: Path) -> None:
    crd = f"customresourcedefinitions/memcacheds.{GROUP}"
    try:
        out = make_test(project, existing=control_plane.kubeconfig_path)
        assert "5 passed" in out, out[-3000:]
        # Every Memcached the tests made was finalized (the one left behind included): what is
        # still there carries no finalizer and goes with its namespace.
        get = ("get", f"memcacheds.{GROUP}", "-A", "-o", "jsonpath={.items[*].metadata.finalizers}")
        assert control_plane.kubectl(*get).stdout.strip() == ""
        deadline = time.monotonic() + 60
        while left := control_plane.kubectl("get", f"memcacheds.{GROUP}", "-A", "-o", "name").stdout:
            assert time.monotonic() < deadline, f"not deleted with their namespaces: {left}"
            time.sleep(0.5)
        # A finalizer the operator never removes: the wait is bounded, the finalizer removed so
        # the namespace can go, and the test errors naming the object.
        stuck = project / "tests" / "test_stuck.py"
        stuck.write_text(STUCK_TEST)
        try:
            res = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_stuck.py"],
                cwd=project,
                env=_env(project, control_plane.kubeconfig_path),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
        finally:
            stuck.unlink()
        assert res.returncode == 1 and "1 passed, 1 error" in res.stdout, res.stdout[-3000:]
        assert (
            f"AssertionError: teardown: memcacheds.{GROUP}/stuck (finalizers ['example.com/never-removed']) "
            "not deleted (after 1 s); removed their finalizers"
        ) in res.stdout, res.stdout[-3000:]
        assert control_plane.kubectl(*get).stdout.strip() == ""
    finally:
        control_plane.kubectl("delete", crd, "--ignore-not-found", "--wait=false", check=False)
