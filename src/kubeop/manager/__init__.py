"""kubeop.manager: run controllers with shared caches, leader election, probes and metrics."""

from kubeop.manager.leader import LeaderElector, LeadershipLost
from kubeop.manager.logs import configure_logging
from kubeop.manager.manager import Manager
from kubeop.manager.server import ProbeServer

__all__ = ["LeaderElector", "LeadershipLost", "Manager", "ProbeServer", "configure_logging"]
