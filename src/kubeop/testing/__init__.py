"""kubeop.testing: a real local Kubernetes control plane for tests, demos and development.

``ControlPlane`` starts etcd + kube-apiserver (and, in full mode, kube-controller-manager,
kube-scheduler and KWOK fake nodes) on loopback ports, from binaries built from pinned Go modules.
The pytest plugin in :mod:`kubeop.testing.pytest_plugin` exposes it as fixtures.

``FakeCluster`` is the opposite end: an in-process API (no Go, no processes) behind the client's
``Transport`` seam, for unit tests of reconcilers that run in milliseconds.
"""

from kubeop.testing.binaries import Binaries, BinaryError, ensure_binaries, locate_binaries
from kubeop.testing.controlplane import ControlPlane, ControlPlaneError
from kubeop.testing.existing import ExistingCluster
from kubeop.testing.fake import FakeCluster

__all__ = [
    "Binaries",
    "BinaryError",
    "ControlPlane",
    "ControlPlaneError",
    "ExistingCluster",
    "FakeCluster",
    "ensure_binaries",
    "locate_binaries",
]
