"""``python -m kubeop.kopf run operator.py [...]``: kopf's ``kopf run`` on kubeop's runtime.

Loads the files and modules (``-m``) that register handlers, then runs them until SIGTERM or
SIGINT. ``--namespace``/``-n`` (repeatable: only the first is used) or ``--all-namespaces``
(``-A``, the default); ``--standalone`` (the default) or ``--peering`` (kubeop's Lease-based
leader election in place of kopf's peering); ``--verbose`` logs the handling cycles.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import runpy
import sys
from collections.abc import Sequence

from kubeop.kopf.running import run

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubeop.kopf")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the handlers registered by the given files/modules")
    r.add_argument("paths", nargs="*", help="Python files that register handlers")
    r.add_argument("-m", "--module", action="append", default=[], help="a module that registers handlers")
    r.add_argument("-n", "--namespace", action="append", default=[], help="handle objects in this namespace")
    r.add_argument("-A", "--all-namespaces", action="store_true", help="handle objects in every namespace")
    r.add_argument("--standalone", action="store_true", default=True, help="no leader election (default)")
    r.add_argument("--peering", dest="standalone", action="store_false", help="elect a leader first")
    r.add_argument("-v", "--verbose", action="store_true", help="log the handling cycles (DEBUG)")
    r.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    args = parser.parse_args(argv)
    if args.namespace and args.all_namespaces:
        parser.error("--namespace and --all-namespaces exclude each other")
    if len(args.namespace) > 1:
        parser.error("one --namespace at most (or --all-namespaces)")
    if not args.paths and not args.module:
        parser.error("name the files (or -m modules) that register the handlers")
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format="[%(asctime)s] %(name)-24s [%(levelname)-8s] %(message)s")
    for path in args.paths:
        sys.path.insert(0, str(__import__("pathlib").Path(path).resolve().parent))
        runpy.run_path(path, run_name="__kopf_script__")
    for module in args.module:
        importlib.import_module(module)
    run(namespace=args.namespace[0] if args.namespace else None, standalone=args.standalone)
    return 0


if __name__ == "__main__":
    sys.exit(main())
