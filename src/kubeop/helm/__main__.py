"""``python -m kubeop.helm``: run a Helm operator from a watches.yaml (operator-sdk's
``helm-operator run``)."""

from __future__ import annotations

import argparse
import os
import sys

from kubeop.helm.operator import run
from kubeop.helm.watches import WatchesError, parse_duration
from kubeop.manager import LeaderElection, Serving
from kubeop.manager.logs import LOG_FORMATS, LOG_LEVELS, configure_logging


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubeop.helm", description="Run a Helm-based operator.")
    parser.add_argument("--watches-file", default=os.environ.get("WATCHES_FILE", "./watches.yaml"))
    parser.add_argument("--reconcile-period", default="1m", help="default reconcile period (Go duration)")
    parser.add_argument("--max-concurrent-reconciles", type=int, default=None)
    parser.add_argument("--max-helm-processes", type=int, default=None)
    parser.add_argument(
        "--disable-openapi-validation",
        action="store_true",
        help="do not let Helm validate rendered objects against the server's OpenAPI schema "
        "before installing or upgrading (faster; the API server still validates)",
    )
    parser.add_argument(
        "--watch-namespace",
        default=os.environ.get("WATCH_NAMESPACE") or None,
        help="reconcile resources in this namespace only (default: $WATCH_NAMESPACE, else all)",
    )
    parser.add_argument("--metrics-bind-address", default="127.0.0.1:8080")
    parser.add_argument(
        "--metrics-secure",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="/metrics over HTTPS for callers the API server authenticates and RBAC allows "
        "(default: unless the address is loopback); --no-metrics-secure: plain HTTP",
    )
    parser.add_argument(
        "--metrics-cert-dir",
        default=None,
        help="tls.crt and tls.key for HTTPS metrics (default: self-signed)",
    )
    parser.add_argument("--health-probe-bind-address", default="127.0.0.1:8081")
    parser.add_argument("--leader-elect", action="store_true")
    parser.add_argument("--leader-election-id", default=None)
    parser.add_argument("--leader-election-namespace", default=None)
    parser.add_argument("--name", default="helm-operator", help="the operator's name (events, field manager)")
    parser.add_argument(
        "--log-level",
        default=os.environ.get("LOG_LEVEL"),
        type=str.lower,
        choices=LOG_LEVELS,
        help="default: $LOG_LEVEL, $KUBEOP_LOG_LEVEL, else info",
    )
    parser.add_argument(
        "--log-format",
        default=os.environ.get("LOG_FORMAT"),
        type=str.lower,
        choices=LOG_FORMATS,
        help="text or json (default: $LOG_FORMAT, $KUBEOP_LOG_FORMAT, else text)",
    )
    args = parser.parse_args(argv)
    try:
        configure_logging(args.log_format, args.log_level)
    except ValueError as e:  # LOG_LEVEL / LOG_FORMAT from the environment, not one of the choices
        parser.error(str(e))
    try:
        period = parse_duration(args.reconcile_period)
    except ValueError as e:
        parser.error(f"--reconcile-period: {e}")
    try:
        run(
            args.watches_file,
            reconcile_period=period,
            max_concurrent_reconciles=args.max_concurrent_reconciles,
            max_helm_processes=args.max_helm_processes,
            openapi_validation=not args.disable_openapi_validation,
            namespace=args.watch_namespace,
            name=args.name,
            serving=Serving(
                metrics_address=args.metrics_bind_address or None,
                metrics_secure=args.metrics_secure,
                metrics_cert_dir=args.metrics_cert_dir,
                health_address=args.health_probe_bind_address or None,
            ),
            leader_election=LeaderElection(
                id=args.leader_election_id, namespace=args.leader_election_namespace
            )
            if args.leader_elect
            else False,
        )
    except WatchesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
