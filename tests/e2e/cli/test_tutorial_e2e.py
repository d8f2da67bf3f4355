"""The Memcached tutorial, as a new user walks it: ``kubeop init``, ``create api``, a model with a
size, a controller that owns a Deployment and finalizes with an Event, and the generated project's
own ``make test`` in each mode its README names: its own minimal control plane, its own full one,
and an existing cluster (this suite's control plane, through ``KUBEOP_TEST_KUBECONFIG``).

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

from .conftest import DOMAIN, scaffold

pytestmark = pytest.mark.controlplane

GROUP = f"cache.{DOMAIN}"

MODEL_FIELD = """    size: Annotated[int, Format("int32")] = Field(
        default=1, ge=1, le=5, description="How many memcached Pods to run."
    )
"""

CONTROLLER = '''"""The Memcached controller: a Deployment of spec.size memcached Pods, and a finalizer that
records an Event before a Memcached goes."""

from __future__ import annotations

from typing import Any

from kubeop.controller import (
    Context,
    Controller,
    GenerationChanged,
    Request,
    Result,
    set_condition,
    set_controller_reference,
)
from kubeop.core.resource import ApiResource
from kubeop.crd.rbac import rbac_rule

from memcached_operator.api.v1.memcached import Memcached

DEPLOYMENTS = ApiResource("apps", "v1", "deployments", kind="Deployment")
FINALIZER = "GROUP/finalizer"


@rbac_rule(groups="GROUP", resources="memcacheds", verbs="get;list;watch;update;patch")
@rbac_rule(groups="GROUP", resources="memcacheds/status", verbs="get;update;patch")
@rbac_rule(groups="GROUP", resources="memcacheds/finalizers", verbs="update")
@rbac_rule(groups="apps", resources="deployments", verbs="get;list;watch;create;update;patch;delete")
@rbac_rule(groups="events.k8s.io", resources="events", verbs="create;patch")
async def reconcile(req: Request, ctx: Context) -> Result | None:
    obj = await ctx.client.get(Memcached, req.name, namespace=req.namespace)
    if obj is None:
        return None

    async def cleanup(gone: Memcached) -> None:
        ctx.recorder.event(gone, "Normal", "Finalizing", f"Memcached {req.name} is being deleted")

    if await ctx.client.finalize(obj, FINALIZER, cleanup):
        return None
    labels = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": req.name}
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": req.name, "namespace": req.namespace, "labels": labels},
        "spec": {
            "replicas": obj.spec.size,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]},
            },
        },
    }
    set_controller_reference(obj, deployment)
    await ctx.client.create_or_update(deployment)
    generation = obj.metadata.generation
    current = obj.status.model_dump(exclude_none=True) if obj.status else {}
    conditions: list[dict[str, Any]] = list(current.get("conditions", []))
    set_condition(conditions, "Ready", True, "Reconciled", "", observed_generation=generation)
    await ctx.client.patch_status(obj, {"observedGeneration": generation, "conditions": conditions})
    return None


def controller() -> Controller:
    return Controller.for_(Memcached, GenerationChanged).owns(DEPLOYMENTS).reconcile(reconcile)
'''.replace("GROUP", GROUP)

PROJECT_TESTS = '''"""The tutorial's checks: the Deployment follows spec.size; deleting runs the finalizer."""

from __future__ import annotations

from kubeop.client import Client

from memcached_operator.api.v1.memcached import Memcached
from memcached_operator.controllers.memcached import DEPLOYMENTS, FINALIZER

from .conftest import Operator, load_sample

SAMPLE = "cache_v1_memcached.yaml"


async def test_the_deployment_follows_the_size(client: Client, operator: Operator, namespace: str) -> None:
    created = await client.create(load_sample(Memcached, SAMPLE, namespace))

    async def scaled() -> bool:
        dep = await client.get_or_none(DEPLOYMENTS, created.metadata.name or "", namespace=namespace)
        return dep is not None and dep["spec"]["replicas"] == 2

    await operator.eventually(scaled, what="a Deployment of 2 replicas")
    # Left behind on purpose: the operator fixture deletes it and waits for its finalizer.


async def test_deleting_runs_the_finalizer(client: Client, operator: Operator, namespace: str) -> None:
    created = await client.create(load_sample(Memcached, SAMPLE, namespace))
    name = created.metadata.name or ""

    async def finalizer_added() -> bool:
        obj = await client.get(Memcached, name, namespace=namespace)
        return FINALIZER in (obj.metadata.finalizers or [])

    await operator.eventually(finalizer_added, what="the finalizer")
    await client.delete(Memcached, name, namespace=namespace)

    async def gone() -> bool:
        return await client.get_or_none(Memcached, name, namespace=namespace) is None

    await operator.eventually(gone, what="the Memcached to be deleted")

    async def event_recorded() -> bool:
        events = (await client.list("events.events.k8s.io", namespace=namespace)).items
        return any(e.get("reason") == "Finalizing" and e["regarding"]["name"] == name for e in events)

    await operator.eventually(event_recorded, what="the Finalizing Event")
'''

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
    root = scaffold(tmp_path_factory.mktemp("tutorial"), "memcached-operator", "cache", "Memcached")
    model = root / "memcached_operator/api/v1/memcached.py"
    generated = model.read_text()
    imports = "from kubeop import CamelModel, CustomResource, ListType, PrinterColumn"
    assert imports in generated, "the kind template's kubeop import changed: update this tutorial"
    text = generated.replace(
        imports, "from kubeop import CamelModel, CustomResource, Format, ListType, PrinterColumn"
    )
    start = text.index("    # An example field")
    end = text.index("\n\n", start)
    model.write_text(text[:start] + MODEL_FIELD.rstrip("\n") + text[end:])
    (root / "memcached_operator/controllers/memcached.py").write_text(CONTROLLER)
    sample = root / "config/samples/cache_v1_memcached.yaml"
    sample.write_text(sample.read_text().split("spec:")[0] + "spec:\n  size: 2\n")
    (root / "tests/test_memcached_tutorial.py").write_text(PROJECT_TESTS)
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
