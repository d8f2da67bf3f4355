"""The MySQL operator: one Manager running the MySQL controller.

    python -m examples.mysql

Configured from the environment: SMTP_HOST (no mail when unset), SMTP_PORT (25), MAIL_FROM,
MAIL_BACKOFF (seconds before the first retry of a failed mail, doubling; 1), MAIL_BACKOFF_CAP
(300), LEADER_ELECT (false).
"""

from __future__ import annotations

import os

from examples.mysql.controllers.mysql import controller
from examples.mysql.controllers.notify import Mailer
from kubeop import Manager, configure_logging
from kubeop.manager import LeaderElection, Serving

NAME = "mysql-operator"


def mailer_from_env() -> Mailer | None:
    env = os.environ.get
    host = env("SMTP_HOST")
    if not host:
        return None
    return Mailer(
        host,
        int(env("SMTP_PORT", "25")),
        sender=env("MAIL_FROM", "mysql-operator@localhost"),
        backoff=float(env("MAIL_BACKOFF", "1")),
        backoff_cap=float(env("MAIL_BACKOFF_CAP", "300")),
    )


def build_manager(mailer: Mailer | None = None) -> Manager:
    elect = os.environ.get("LEADER_ELECT", "false").lower() in ("1", "true", "yes")
    manager = Manager(
        name=NAME,
        serving=Serving(
            metrics_address=os.environ.get("METRICS_BIND_ADDRESS", "127.0.0.1:8080") or None,
            health_address=os.environ.get("HEALTH_PROBE_BIND_ADDRESS", "127.0.0.1:8081") or None,
        ),
        leader_election=LeaderElection(id=f"{NAME}-leader") if elect else False,
    )
    manager.add(controller(mailer))
    return manager


def main() -> None:
    configure_logging()  # text, or KUBEOP_LOG_FORMAT=json; KUBEOP_LOG_LEVEL
    build_manager(mailer_from_env()).run()
