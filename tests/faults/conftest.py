"""Fixtures of the fault suite: control planes of its own (never the session's shared one: these
tests kill kube-apiserver, compact etcd and pause processes), with the Widget CRD installed."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from kubeop.testing import ControlPlane

from .support import fresh_namespace, install_widget_crd


def _plane(request: pytest.FixtureRequest, full: bool) -> Iterator[ControlPlane]:
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")

    def progress(msg: str) -> None:
        if reporter is not None:
            reporter.write_line(msg)

    # A plane that cannot start fails the test (ControlPlaneError); nothing is skipped.
    with ControlPlane(full=full, nodes=1, progress=progress) as cp:
        install_widget_crd(cp)
        yield cp


@pytest.fixture(scope="session")
def fault_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver, for this suite only."""
    yield from _plane(request, full=False)


@pytest.fixture(scope="session")
def fault_plane_full(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """The full control plane (the garbage collector runs), for this suite only.

    kube-controller-manager's garbage collector takes up a new CRD at its next discovery, up to
    ~45 s after the start: a test that needs it to collect Widgets' children waits for that
    (``wait_garbage_collector``), or allows for it in its own waits.
    """
    yield from _plane(request, full=True)


@pytest.fixture
def fault_namespace(fault_plane: ControlPlane, request: pytest.FixtureRequest) -> str:
    """A fresh namespace on ``fault_plane`` (left behind: the plane is thrown away at the end)."""
    prefix = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower().removeprefix("test_"))[:24].strip("-")
    return fresh_namespace(fault_plane, prefix or "faults")
