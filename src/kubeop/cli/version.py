"""``kubeop version``: kubeop's and Python's versions, the control-plane versions kubeop pins, and
which binaries a local control plane would use (installed, cached, or still to build)."""

from __future__ import annotations

import json
import platform
import sys
from typing import Annotated, Any

import typer

import kubeop
from kubeop.testing import binaries as bins

__all__ = ["version", "version_info"]


def version_info() -> dict[str, Any]:
    """Everything ``kubeop version`` prints, as data (``--output json`` prints this)."""
    root = bins.cache_dir()
    selection = bins.select_binaries(full=True, with_helm=True)
    return {
        "kubeop": kubeop.__version__,
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "pinned": {name: component.version for name, component in bins.COMPONENTS.items()},
        "cache": {
            "dir": str(root / "bin"),
            "components": {
                name: {
                    "dir": str(bins.component_dir(component)),
                    "built": bins.check_component(component) is None,
                    **({"problem": p} if (p := bins.check_component(component)) else {}),
                }
                for name, component in bins.COMPONENTS.items()
            },
        },
        "binaries": {
            command: {"path": str(choice.path), "source": choice.source, "version": choice.version}
            for command, choice in selection.choices.items()
        },
        "installed": [
            {
                "command": found.command,
                "path": str(found.path),
                "origin": found.origin,
                "version": found.version,
                "used": found.usable,
                "line": found.line(),
            }
            for candidates in selection.installed.values()
            for found in candidates
        ],
        "notes": list(selection.notes),
    }


_SOURCES = {
    "cache": "cached build",
    "build": "not built yet: built on first use or by `kubeop cluster build`",
}


def _text(info: dict[str, Any]) -> str:
    pinned = ", ".join(f"{name} {v}" for name, v in info["pinned"].items())
    lines = [
        f"kubeop {info['kubeop']}",
        f"Python {info['python']['version']} ({info['python']['executable']})",
        f"control plane (pinned): {pinned}",
        f"cache: {info['cache']['dir']}",
    ]
    for name, entry in info["cache"]["components"].items():
        state = "built" if entry["built"] else entry["problem"]
        lines.append(f"  {name} {info['pinned'][name]}: {state}")
    lines.append("binaries a local control plane uses:")
    width = max(len(c) for c in info["binaries"])
    for command, choice in info["binaries"].items():
        source = _SOURCES.get(choice["source"], f"from {choice['source']}")
        lines.append(f"  {command:<{width}}  {choice['path']} ({source})")
    lines += [f"  {found['line']}" for found in info["installed"] if not found["used"]]
    lines += [f"  {note}" for note in info["notes"]]
    return "\n".join(lines)


def version(
    output: Annotated[str, typer.Option("--output", "-o", help="text or json")] = "text",
) -> None:
    """Show kubeop's version, Python's, the control-plane versions kubeop pins and which binaries it uses."""
    if output not in ("text", "json"):
        typer.secho(f"error: --output must be text or json, not {output!r}", err=True, fg=typer.colors.RED)
        raise typer.Exit(2)
    info = version_info()
    typer.echo(json.dumps(info, indent=2) if output == "json" else _text(info))
