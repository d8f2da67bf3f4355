"""The DatabaseCluster operator: one Manager running the DatabaseCluster controller.

    python -m examples.dbcluster

LEADER_ELECT=true elects a leader through a Lease; METRICS_BIND_ADDRESS and
HEALTH_PROBE_BIND_ADDRESS (empty: off) say where /metrics and the probes are served.
"""

from __future__ import annotations

import os

from examples.dbcluster.controllers.databasecluster import controller
from kubeop import Manager, configure_logging
from kubeop.manager import LeaderElection, Serving

NAME = "dbcluster-operator"


def build_manager() -> Manager:
    elect = os.environ.get("LEADER_ELECT", "false").lower() in ("1", "true", "yes")
    manager = Manager(
        name=NAME,
        serving=Serving(
            metrics_address=os.environ.get("METRICS_BIND_ADDRESS", "127.0.0.1:8080") or None,
            health_address=os.environ.get("HEALTH_PROBE_BIND_ADDRESS", "127.0.0.1:8081") or None,
        ),
        leader_election=LeaderElection(id=f"{NAME}-leader") if elect else False,
    )
    manager.add(controller())
    return manager


def main() -> None:
    configure_logging()  # text, or KUBEOP_LOG_FORMAT=json; KUBEOP_LOG_LEVEL
    build_manager().run()
