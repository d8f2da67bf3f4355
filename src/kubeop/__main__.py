"""``python -m kubeop`` and the ``kubeop`` script: the command line, or how to install it.

The command line's libraries (typer and what it brings) are the ``cli`` extra, not the operator
runtime's dependencies: an operator image does not carry them.
"""

from __future__ import annotations

import sys

CLI_EXTRA_HINT = "pip install 'kubeop[cli]'"


def main() -> None:
    """Run ``kubeop``; without the ``cli`` extra, say how to install it (exit code 1)."""
    try:
        from kubeop.cli import main as cli_main
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] not in ("typer", "click", "rich", "shellingham"):
            raise
        print(
            f"error: kubeop's command line needs {e.name}, which is not installed: {CLI_EXTRA_HINT} "
            "(the operator runtime, `import kubeop`, does not need it)",
            file=sys.stderr,
        )
        raise SystemExit(1) from None
    cli_main()


if __name__ == "__main__":
    main()
