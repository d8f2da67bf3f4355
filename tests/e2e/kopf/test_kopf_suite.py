"""kopf's OWN end-to-end suite, run against kubeop with only the import changed.

kopf 1.45.2's sdist (fetched at test time, pinned by version and sha256: :mod:`.sdist`) carries
``tests/e2e/test_examples.py`` and the examples with their own tests. They are unpacked into a
temporary directory, ``import kopf`` becomes ``import kubeop.kopf as kopf`` (and
``kopf.testing`` kubeop's :class:`~kubeop.kopf.testing.KopfRunner`), and pytest runs them there
in a subprocess against this session's control plane (``kubectl`` and pykube read its
KUBECONFIG; objects go to the namespace ``default``, as in kopf's CI). kopf's own
``tests/conftest.py`` imports kopf's internals, so the few fixtures the e2e tests use
(``settings``, ``exampledir``, ``with_crd``, a fresh registry per test) come from
:data:`CONFTEST` instead. ``-W ignore::ResourceWarning`` as in the baseline run with real kopf.

``make test`` runs :data:`QUICK` (the generic test, an example's own test, the admission webhooks
the API server calls, and the example using the most features; ~42 s); ``KUBEOP_FAULTS=full``
(``make faults``) runs all 17 (~160 s), ``KUBEOP_KOPF_SUITE=01-minimal,13-hooks`` the ones named.

kopf's 17 example tests on kubeop (real kopf passes all 17 on the same control plane):

=========================  ======  ===========================================================
test                       result  what it exercises / why it fails
=========================  ======  ===========================================================
01-minimal                 passes  create handler, kopf's log lines, the login activity
02-children                passes  kopf.adopt of a Pod created with pykube (full control plane)
03-exceptions              passes  temporary/permanent/arbitrary errors, retries, backoff
04-events                  passes  kopf.event/info/warn/exception
05-handlers                passes  create/update/delete/field handlers, the finalizer
06-peering                 passes  run --standalone; peering maps to kubeop's Lease election
07-subhandlers             passes  kopf.subhandler in a create handler, progress per sub-handler
08-events                  passes  on.event for the resource's watch events
09-testing                 passes  its own test: KopfRunner, OperatorSettings
10-builtins                passes  its own test: on.resume/create/delete of Pods
11-filtering-handlers      passes  its own test: labels/annotations/when/field/value filters
13-hooks                   passes  on.startup (retried), on.cleanup, on.login, on.probe, hung tasks
14-daemons                 passes  a sync daemon waited for, an async one cancelled on deletion
15-timers                  passes  (the timers idle 5/10 s, longer than the test keeps the object)
16-indexing                passes  kopf.index of Pods, the indices as a timer's and probes' kwargs
17-admission               passes  validate/mutate called by the API server, managed configs
99-all-at-once             passes  startup/cleanup, retries, kopf.label, a child Pod, on.event
=========================  ======  ===========================================================

12-embedded has no test in kopf (``test_nothing.py`` only disables the generic one): this module's
:func:`test_kopf_embedded_example` runs its ``main()``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kubeop.testing import ControlPlane
from tests.e2e.kopf.sdist import KOPF_VERSION, kopf_sdist, rewrite_imports

pytestmark = [pytest.mark.controlplane, pytest.mark.full]

GENERIC = "tests/e2e/test_examples.py::test_all_examples_are_runnable[{}]"
OWN = {
    "09-testing": "examples/09-testing/test_example_09.py::test_resource_lifecycle",
    "10-builtins": "examples/10-builtins/test_example_10.py::test_pods_reacted",
    "11-filtering-handlers": "examples/11-filtering-handlers/test_example_11.py::test_handler_filtering",
}
ALL = {
    **{
        name: GENERIC.format(name)
        for name in (
            "01-minimal",
            "02-children",
            "03-exceptions",
            "04-events",
            "05-handlers",
            "06-peering",
            "07-subhandlers",
            "08-events",
            "13-hooks",
            "14-daemons",
            "15-timers",
            "16-indexing",
            "17-admission",
            "99-all-at-once",
        )
    },
    **OWN,
}
# The examples that cannot pass yet, with why (a pass is reported: update the table above).
EXPECTED_FAILURES: dict[str, str] = {}  # none: all 17 pass
QUICK = ("01-minimal", "11-filtering-handlers", "17-admission", "99-all-at-once")
FULL = os.environ.get("KUBEOP_FAULTS") == "full"

CONFTEST = """
import glob
import os
import pathlib
import subprocess

import pytest

import kubeop.kopf as kopf

examples = sorted(glob.glob("examples/*/"))
examples = [path for path in examples if not glob.glob(os.path.join(path, "test*.py"))]


@pytest.fixture(autouse=True)
def registry():
    old = kopf.get_default_registry()
    kopf.set_default_registry(kopf.Registry())
    yield
    kopf.set_default_registry(old)


@pytest.fixture()
def settings():
    return kopf.OperatorSettings()


@pytest.fixture(params=examples, ids=[os.path.basename(p.rstrip("/")) for p in examples])
def exampledir(request):
    return pathlib.Path(request.param)


@pytest.fixture()
def with_crd():
    subprocess.run(
        "kubectl apply -f examples/crd.yaml", shell=True, check=True, timeout=10, capture_output=True
    )
"""


def unpack_suite(into: Path) -> Path:
    """kopf's examples and tests/e2e, imports rewritten, with :data:`CONFTEST` beside them."""
    prefix = f"kopf-{KOPF_VERSION}/"
    wanted = (f"{prefix}examples/", f"{prefix}tests/e2e/test_examples.py")
    with tarfile.open(kopf_sdist()) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(wanted)]
        tar.extractall(into, members=members, filter="data")
    root = into / prefix
    for py in root.rglob("*.py"):
        source, _ = rewrite_imports(py.read_text())
        assert not re.search(r"^\s*(import kopf|from kopf)\b", source, re.M), f"{py}: a kopf import is left"
        py.write_text(source)
    (root / "conftest.py").write_text(CONFTEST)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return root


def run_suite(cp: ControlPlane, root: Path, names: list[str]) -> tuple[dict[str, str], str]:
    """Run kopf's tests by example name; each one's outcome and pytest's whole output."""
    report = root / "report.xml"
    env = dict(cp.env(), PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rfE",
            "-W",
            "ignore::ResourceWarning",
            f"--junitxml={report}",
            *(ALL[n] for n in names),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60 * len(names) + 120,
    )
    output = proc.stdout + proc.stderr
    assert report.exists(), output[-6000:]
    outcomes: dict[str, str] = {}
    by_id = {v: k for k, v in ALL.items()}
    for case in ET.parse(report).getroot().iter("testcase"):
        file = case.get("classname", "").replace(".", "/") + ".py"
        node = f"{file}::{case.get('name')}"
        failed = case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped") is not None
        outcome = "skipped" if skipped else "failed" if failed else "passed"
        outcomes[by_id.get(node, node)] = f"{outcome} {float(case.get('time') or 0):.1f}s"
    return outcomes, output


def test_kopf_own_e2e_suite(control_plane: ControlPlane, tmp_path: Path) -> None:
    root = unpack_suite(tmp_path)
    control_plane.install_crds([root / "examples" / "crd.yaml"])
    chosen = os.environ.get("KUBEOP_KOPF_SUITE")  # e.g. "01-minimal,13-hooks" to run those
    names = chosen.split(",") if chosen else sorted(ALL) if FULL else list(QUICK)
    t0 = time.monotonic()
    outcomes, output = run_suite(control_plane, root, names)
    took = time.monotonic() - t0
    unexpected = {
        n: outcomes.get(n, "not run")
        for n in names
        if outcomes.get(n, "").split()[:1] != ["failed" if n in EXPECTED_FAILURES else "passed"]
    }
    print(f"kopf's suite on kubeop, {took:.0f} s:", *(f"{n}: {outcomes.get(n)}" for n in names), sep="\n  ")
    assert not unexpected, f"kopf's suite on kubeop ({took:.0f} s): {unexpected}\n{output[-12000:]}"


def test_kopf_embedded_example(control_plane: ControlPlane, tmp_path: Path) -> None:
    """12-embedded has no test of its own (kopf cannot test an application embedding it); this one
    runs its ``main()``: ``kopf.operator(ready_flag=, stop_flag=, memo=)`` in a thread of the
    application, ``kopf.configure(verbose=True)``, three objects created and deleted meanwhile."""
    root = unpack_suite(tmp_path)
    control_plane.install_crds([root / "examples" / "crd.yaml"])
    env = dict(control_plane.env(), PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [sys.executable, "examples/12-embedded/example.py"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    for step in range(3):
        assert f"Hello, kopf-example-{step}!" in output, output[-6000:]
        assert f"Good bye, kopf-example-{step}!" in output, output[-6000:]
    assert "Exiting the main app." in output and "Traceback" not in output, output[-6000:]


PEERED = """
import kubeop.kopf as kopf


@kopf.on.create("kopfexamples.kopf.dev")
def create_fn(**_):
    return {"message": "led"}


@kopf.on.probe(id="objects_seen")
def objects_seen(**_):
    return 1
"""


def test_peering_is_leader_election_and_liveness_runs_the_probes(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """06-peering's ``--peering NAME`` on kubeop: handling starts once the Lease ``kopf-NAME`` is
    held (in ``settings.peering.namespace``); ``--liveness`` answers kopf's JSON of the probe
    handlers' results by handler id."""
    from kubeop.kopf import OperatorSettings, Registry
    from kubeop.kopf.testing import KopfRunner

    control_plane.install_crds([unpack_suite(tmp_path / "sdist") / "examples" / "crd.yaml"])
    script = tmp_path / "peered.py"
    script.write_text(PEERED)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = OperatorSettings()
    settings.peering.namespace = namespace
    args = ["run", "-n", namespace, "--peering", "team", "--liveness", f"http://127.0.0.1:{port}/healthz"]
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/kopf-team"
    obj_path = f"/apis/kopf.dev/v1/namespaces/{namespace}/kopfexamples"
    with KopfRunner(
        [*args, "--verbose", str(script)],
        registry=Registry(),
        settings=settings,
        env={"KUBECONFIG": control_plane.kubeconfig_path},
        timeout=60,
    ):
        deadline = time.monotonic() + 30
        while control_plane.api.raw("GET", lease)[0] != 200:
            assert time.monotonic() < deadline, "no Lease kopf-team"
            time.sleep(0.1)
        assert control_plane.api.call("GET", lease)["spec"].get("holderIdentity")
        control_plane.api.call(
            "POST",
            obj_path,
            {"apiVersion": "kopf.dev/v1", "kind": "KopfExample", "metadata": {"name": "led"}, "spec": {}},
        )
        while (
            (control_plane.api.call("GET", f"{obj_path}/led").get("status") or {}).get("create_fn")
        ) is None:
            assert time.monotonic() < deadline, "the create handler did not run under the lease"
            time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.status == 200
            assert json.loads(response.read()) == {"objects_seen": 1}
        control_plane.api.call("DELETE", f"{obj_path}/led")
