"""An in-process fake Kubernetes API for unit tests: :class:`FakeCluster` (see its module)."""

from kubeop.testing.fake.cluster import FakeCluster, SteppableClock
from kubeop.testing.fake.transport import FakeTransport

__all__ = ["FakeCluster", "FakeTransport", "SteppableClock"]
