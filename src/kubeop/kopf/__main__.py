"""``python -m kubeop.kopf run operator.py [...]``: kopf's ``kopf run`` on kubeop's runtime.

Loads the files and modules (``-m``) that register handlers, then runs them until SIGTERM or
SIGINT. kopf's options: ``--namespace``/``-n`` (repeated; a name or kopf's pattern such as
``'team-*'`` or ``'!kube-*'``, see :mod:`kubeop.kopf.namespaces`) or ``--all-namespaces``/``-A``
(the default); ``--standalone`` (the default) or ``--peering NAME``
(kubeop's Lease-based leader election, the Lease named ``kopf-NAME``, in place of kopf's
peering; ``--priority`` is accepted, the first replica leads); ``--liveness URL`` (kopf's
liveness endpoint: a GET of the URL's path answers the probe handlers' results as JSON, see
:mod:`kubeop.kopf.probing`);
``--verbose``/``--debug`` log the handling cycles, ``--quiet`` warnings only.
"""

from __future__ import annotations

import argparse
import importlib
import runpy
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubeop.kopf.namespaces import Namespaces
from kubeop.kopf.running import configure, run

__all__ = ["RunArgs", "load", "main", "parse"]


@dataclass(frozen=True)
class RunArgs:
    """``kopf run``'s arguments, parsed."""

    paths: tuple[str, ...]
    modules: tuple[str, ...]
    namespaces: tuple[str, ...]
    standalone: bool | None
    peering_name: str | None
    priority: int | None
    liveness_endpoint: str | None
    verbose: bool
    debug: bool
    quiet: bool

    def operator_options(self) -> dict[str, Any]:
        """The keyword arguments of ``kopf.operator()``/``kopf.run()`` for these arguments."""
        return {
            "namespaces": self.namespaces,
            "standalone": self.standalone,
            "peering_name": self.peering_name,
            "priority": self.priority,
            "liveness_endpoint": self.liveness_endpoint,
        }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kubeop.kopf")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the handlers registered by the given files/modules")
    r.add_argument("paths", nargs="*", help="Python files that register handlers")
    r.add_argument("-m", "--module", action="append", default=[], help="a module that registers handlers")
    r.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="handle objects in this namespace (repeat it; globs and !negations as kopf)",
    )
    r.add_argument("-A", "--all-namespaces", action="store_true", help="handle objects in every namespace")
    r.add_argument("--standalone", action="store_true", default=None, help="no leader election (default)")
    r.add_argument(
        "--peering",
        dest="peering_name",
        nargs="?",
        const="default",
        default=None,
        metavar="NAME",
        help="elect a leader first (kubeop's Lease kopf-NAME) instead of kopf's peering",
    )
    r.add_argument("--priority", type=int, default=None, help="accepted; the first replica leads")
    r.add_argument(
        "--liveness",
        dest="liveness_endpoint",
        default=None,
        metavar="URL",
        help="e.g. http://0.0.0.0:8080/healthz",
    )
    r.add_argument("-v", "--verbose", action="store_true", help="log the handling cycles (DEBUG)")
    r.add_argument("-d", "--debug", action="store_true", help="as --verbose")
    r.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    for flag in ("--dev", "--log-prefix", "--no-log-prefix"):
        r.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
    for option in ("--log-format", "--log-refkey"):
        r.add_argument(option, default=None, help=argparse.SUPPRESS)
    return parser


def parse(argv: Sequence[str] | None = None) -> RunArgs:
    """Parse ``run ...`` as kopf's CLI does; a usage error exits with code 2 naming the option."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.namespace and args.all_namespaces:
        parser.error("--namespace and --all-namespaces exclude each other")
    try:
        Namespaces.of(namespaces=args.namespace)
    except (TypeError, ValueError) as exc:
        parser.error(f"--namespace: {exc}")
    if not args.paths and not args.module:
        parser.error("name the files (or -m modules) that register the handlers")
    if args.standalone and args.peering_name:
        parser.error("--standalone and --peering exclude each other")
    return RunArgs(
        paths=tuple(args.paths),
        modules=tuple(args.module),
        namespaces=tuple(args.namespace),
        standalone=True if args.standalone else False if args.peering_name else None,
        peering_name=args.peering_name,
        priority=args.priority,
        liveness_endpoint=args.liveness_endpoint,
        verbose=args.verbose,
        debug=args.debug,
        quiet=args.quiet,
    )


def load(args: RunArgs) -> None:
    """Run the files and import the modules that register the handlers."""
    for path in args.paths:
        sys.path.insert(0, str(Path(path).resolve().parent))
        runpy.run_path(path, run_name="__kopf_script__")
    for module in args.modules:
        importlib.import_module(module)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    configure(verbose=args.verbose, debug=args.debug, quiet=args.quiet)
    load(args)
    run(**args.operator_options())
    return 0


if __name__ == "__main__":
    sys.exit(main())
