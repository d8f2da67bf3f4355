"""kubeop.manager: run controllers with shared caches, leader election, probes and metrics."""

from kubeop.manager.leader import LeaderElector, LeadershipLost
from kubeop.manager.logs import configure_logging
from kubeop.manager.manager import Manager
from kubeop.manager.membership import ShardLeaseLost
from kubeop.manager.server import ProbeServer
from kubeop.manager.sharding import Sharding

__all__ = [
    "LeaderElector",
    "LeadershipLost",
    "Manager",
    "ProbeServer",
    "ShardLeaseLost",
    "Sharding",
    "configure_logging",
]
