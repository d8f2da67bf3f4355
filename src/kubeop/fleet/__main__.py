"""``python -m kubeop.fleet PACKAGE [ARGS...]``: a project's operator on several clusters.

What ``kubeop run --kubeconfig a --kubeconfig b`` (or ``--cluster-secret-selector``) runs: the
project's ``PACKAGE.main`` builds its Manager as ever (``build_manager(parse_args(ARGS))``, as
``kubeop init`` writes it), and its controllers run as a :class:`~kubeop.fleet.Fleet` on the
clusters the environment names (:mod:`kubeop.fleet.environment`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from importlib import import_module

from kubeop.fleet.environment import KUBECONFIGS_ENV, SECRET_SELECTOR_ENV, fleet_for
from kubeop.manager import Manager
from kubeop.manager.logs import configure_logging


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-"):
        raise SystemExit("usage: python -m kubeop.fleet PACKAGE [ARGS...] (the operator's package first)")
    package, args = argv[0], argv[1:]
    try:
        entry = import_module(f"{package}.main")
    except ModuleNotFoundError as exc:
        raise SystemExit(f"kubeop.fleet: cannot import {package}.main ({exc})") from None
    build = getattr(entry, "build_manager", None)
    parse = getattr(entry, "parse_args", None)
    if not callable(build) or not callable(parse):
        raise SystemExit(
            f"kubeop.fleet: {package}.main has no build_manager(args) and parse_args(argv), which a "
            "fleet run uses to build the operator's controllers (kubeop init writes both)"
        )
    parsed = parse(args)
    try:
        configure_logging(getattr(parsed, "log_format", None), getattr(parsed, "log_level", None))
    except ValueError as exc:
        raise SystemExit(f"{package}: {exc}") from None
    manager = build(parsed)
    if not isinstance(manager, Manager):
        raise SystemExit(f"kubeop.fleet: {package}.main.build_manager returned {type(manager).__name__}")
    try:
        fleet = fleet_for(manager)
    except ValueError as exc:
        raise SystemExit(f"{package}: {exc}") from None
    if fleet is None:
        raise SystemExit(f"kubeop.fleet: no clusters: set {KUBECONFIGS_ENV} or {SECRET_SELECTOR_ENV}")
    try:
        fleet.run()
    except TimeoutError as exc:
        logging.getLogger(package).critical("%s", exc)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
