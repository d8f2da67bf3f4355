"""Templates: package data under ``templates/``, with ``{{ name }}`` placeholders.

The placeholder syntax stays clear of what the templates themselves contain: ``$(VAR)`` in the
Makefile, ``${VAR}`` in shell, ``{}`` in Python. A placeholder without a value is an error (a
template bug), never an empty string in a user's project.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from kubeop.crd import render_yaml

__all__ = ["dump_yaml", "render", "render_template", "template_text"]

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def render(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every ``{{ name }}`` replaced by ``values[name]``."""
    missing = sorted({m.group(1) for m in _PLACEHOLDER.finditer(text)} - values.keys())
    if missing:
        raise KeyError(f"template placeholders without a value: {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def template_text(name: str) -> str:
    """The raw text of ``templates/<name>`` (``/``-separated)."""
    node = resources.files("kubeop.scaffold").joinpath("templates")
    for part in name.split("/"):
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8")


def render_template(name: str, values: Mapping[str, str]) -> str:
    return render(template_text(name), values)


def dump_yaml(obj: Mapping[str, Any]) -> str:
    """One YAML document as kubeop writes every generated file: keys in order, no anchors."""
    return render_yaml(obj).removeprefix("---\n")
