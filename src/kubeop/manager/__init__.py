"""kubeop.manager: run controllers and other runnables on one cluster, with leader election or
sharding, probes, metrics and webhooks."""

from typing import TYPE_CHECKING, Any

from kubeop.manager.leader import LeaderElector, LeadershipLost
from kubeop.manager.logs import configure_logging
from kubeop.manager.manager import Manager
from kubeop.manager.options import Dashboard, LeaderElection, Runtime, Serving, Sharding, WebhookLimits
from kubeop.manager.runnable import Phase, Runnable, runnable
from kubeop.manager.server import ProbeServer

if TYPE_CHECKING:
    from kubeop.manager.membership import ShardLeaseLost

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


def __getattr__(name: str) -> Any:
    # Shard membership loads with sharding (kubeop.manager.sharding), not with every manager.
    if name == "ShardLeaseLost":
        from kubeop.manager.membership import ShardLeaseLost

        return ShardLeaseLost
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "ShardLeaseLost"})
