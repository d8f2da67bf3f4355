"""pytest plugin (loaded automatically once kubeop is installed): a real control plane for tests.

Fixtures:

* ``control_plane`` (session): a :class:`~kubeop.testing.ControlPlane` started once per test
  session, full by default (controller-manager, scheduler, KWOK nodes). A test that needs it
  *fails* when it cannot start; nothing is skipped.
* ``kubeconfig_path`` (session): the admin kubeconfig of that control plane.
* ``namespace`` (function): a fresh namespace for one test, deleted afterwards.
* ``fake_cluster`` (function): a fresh in-process :class:`~kubeop.testing.FakeCluster` for unit
  tests of reconcilers (no control plane, no processes).

Options (or environment variables):

* ``--kubeop-control-plane=full|minimal`` (``KUBEOP_TEST_CONTROL_PLANE``): ``minimal`` runs
  only etcd + kube-apiserver; tests marked ``full`` then fail with a clear message.
* ``--kubeop-kubeconfig=PATH`` (``KUBEOP_TEST_KUBECONFIG``): use an existing cluster instead.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator

import pytest

from kubeop.testing.controlplane import ControlPlane
from kubeop.testing.existing import ExistingCluster
from kubeop.testing.fake import FakeCluster

AnyCluster = ControlPlane | ExistingCluster


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kubeop", "kubeop local control plane")
    group.addoption(
        "--kubeop-control-plane",
        choices=("full", "minimal"),
        default=os.environ.get("KUBEOP_TEST_CONTROL_PLANE", "full"),
        help="which local control plane the control_plane fixture starts (default: full)",
    )
    group.addoption(
        "--kubeop-kubeconfig",
        default=os.environ.get("KUBEOP_TEST_KUBECONFIG"),
        help="run the control-plane tests against this existing cluster instead of a local one",
    )
    group.addoption(
        "--kubeop-nodes",
        type=int,
        default=int(os.environ.get("KUBEOP_TEST_NODES", "2")),
        help="number of KWOK fake nodes in the full control plane (default: 2)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "controlplane: uses the real local control plane")
    config.addinivalue_line("markers", "full: needs controller-manager, scheduler and KWOK nodes")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "control_plane" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.controlplane)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[AnyCluster]:
    existing = request.config.getoption("--kubeop-kubeconfig")
    if existing:
        yield ExistingCluster(existing)
        return
    full = request.config.getoption("--kubeop-control-plane") == "full"
    nodes = request.config.getoption("--kubeop-nodes")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")

    def progress(msg: str) -> None:
        if reporter is not None:
            reporter.write_line(msg)

    with ControlPlane(full=full, nodes=nodes, progress=progress) as cp:
        yield cp


@pytest.fixture(autouse=True)
def _kubeop_require_full(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("full") is None:
        return
    cp = request.getfixturevalue("control_plane")
    if isinstance(cp, ControlPlane) and not cp.full:
        pytest.fail(
            "this test needs the full control plane (controller-manager, scheduler, KWOK nodes); "
            "run without --kubeop-control-plane=minimal",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def kubeconfig_path(control_plane: AnyCluster) -> str:
    return control_plane.kubeconfig_path


def namespace_name(test_name: str) -> str:
    """A valid, unique namespace name derived from a test's name (DNS-1123 label, <= 63 chars)."""
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:48].strip("-") or "t"
    return f"{base}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace(control_plane: AnyCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = namespace_name(request.node.name)
    control_plane.create_namespace(name)
    yield name
    control_plane.delete_namespace(name)


@pytest.fixture
def fake_cluster() -> FakeCluster:
    """A fresh in-process fake cluster (``cluster.client()``, ``cluster.step(...)``...)."""
    return FakeCluster()
