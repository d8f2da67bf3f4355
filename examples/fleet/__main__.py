"""Run the Widget fleet operator on several clusters:

    python -m examples.fleet east=east.yaml west=west.yaml      # a cluster per kubeconfig
    kubeop run --kubeconfig east.yaml --kubeconfig west.yaml     # the same, in a project

Without arguments it reads the clusters from ``KUBEOP_FLEET_KUBECONFIGS`` /
``KUBEOP_FLEET_SECRET_SELECTOR`` (what ``kubeop run`` sets; kubeconfig Secrets are read from the
hub, the cluster of ``$KUBECONFIG``). ``--metrics-bind-address 127.0.0.1:8080`` serves /metrics,
the series labelled with the cluster.
"""

from __future__ import annotations

import argparse
import os

from examples.fleet.operator import controller
from kubeop import configure_logging
from kubeop.fleet import Fleet, Kubeconfigs
from kubeop.fleet.environment import parse_kubeconfigs, providers_from


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.fleet", description=__doc__.splitlines()[0])
    parser.add_argument(
        "clusters", nargs="*", help="NAME=KUBECONFIG (or a kubeconfig path: named after the file)"
    )
    parser.add_argument("--metrics-bind-address", default=None, help="serve /metrics here (loopback)")
    args = parser.parse_args(argv)
    try:
        providers = (
            [Kubeconfigs(parse_kubeconfigs(args.clusters, where="cluster"))]
            if args.clusters
            else providers_from(os.environ)
        )
    except ValueError as exc:
        parser.error(str(exc))
    if not providers:
        parser.error(
            "no clusters: give NAME=KUBECONFIG arguments (or run it with kubeop run --kubeconfig ...)"
        )
    configure_logging()  # text, or KUBEOP_LOG_FORMAT=json; KUBEOP_LOG_LEVEL
    fleet = Fleet(*providers, name="widget-fleet-operator", metrics_address=args.metrics_bind_address)
    fleet.add(controller())
    fleet.run()


if __name__ == "__main__":
    main()
