"""kubeop.manager: run controllers and other runnables on one cluster, with leader election or
sharding, probes, metrics and webhooks."""

from kubeop.manager.leader import LeaderElector, LeadershipLost
from kubeop.manager.logs import configure_logging
from kubeop.manager.manager import Manager
from kubeop.manager.membership import ShardLeaseLost
from kubeop.manager.options import Dashboard, LeaderElection, Runtime, Serving, WebhookLimits
from kubeop.manager.runnable import Phase, Runnable, runnable
from kubeop.manager.server import ProbeServer
from kubeop.manager.sharding import Sharding

__all__ = [
    "Dashboard",
    "LeaderElection",
    "LeaderElector",
    "LeadershipLost",
    "Manager",
    "Phase",
    "ProbeServer",
    "Runnable",
    "Runtime",
    "Serving",
    "ShardLeaseLost",
    "Sharding",
    "WebhookLimits",
    "configure_logging",
    "runnable",
]
